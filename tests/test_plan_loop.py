"""Plan, run, then measure the plan (issue 26 point 1): `jurymeter plan` stores a plan with predictions,
the run that fits its judgments sets them beside what it measured, and alerts when they disagree.

The predictions' statistics are checked by simulation in tests/test_plan_prediction.py; here the
contracts of the loop: what is stored, that the run's comparison reads the run's own dstudy table (read
back independently from the published parquet), that a run whose noise grew fourfold is alerted by name,
that a run that did not follow the plan is told so, and the flags' errors.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from ingest_util import run_ingest
from jurymeter.cli import app
from jurymeter.io.store import Store
from jurymeter.pipeline.config import load_config
from jurymeter.simulate import SimulationParams, simulate_dump, write_dump
from report_pages import fit_publish_and_print

_PLAIN = {"n_generations": 1, "n_replicates": 1, "round_scores": False, "carry_over": 0.0,
          "self_preference": 0.0, "pairwise_pairs": None}


def _ingest(store: Store, tmp_path: Path, name: str, **params: object) -> None:
    dump = simulate_dump(SimulationParams(**{**_PLAIN, **params}))  # type: ignore[arg-type]
    paths = write_dump(dump, tmp_path / name)
    run_ingest(store, paths["pointwise"])


def _config(store: Store) -> Path:
    """The runs' configuration: the G-study alone (the loop's analysis), 200 resamples."""
    path = Path(store.url).parent / "jm.toml"
    path.write_text(f'store = "{store.url}"\nlanding = ""\n[fit]\nn_boot = 200\nanalyses = ["gstudy"]\n')
    return path


@pytest.fixture
def planned(tmp_path: Path) -> tuple[Store, Path]:
    store = Store(str(tmp_path / "store"))
    _ingest(store, tmp_path, "tonight", seed=1, n_systems=6, n_items=24, n_judges=3)
    out = tmp_path / "plan.csv"
    result = CliRunner().invoke(app, ["plan", "--config", str(_config(store)), "--item-set", "sim-chat", "--crossed",
                                      "--plan-id", "p1", "--next-item-set", "sim-next", "--out", str(out)])
    assert result.exit_code == 0, result.output
    return store, out


def _plan_json(store: Store) -> dict:
    return _plan_json_of(store, "p1")


def _plan_json_of(store: Store, plan_id: str) -> dict:
    return orjson.loads((Path(store.url) / "plans" / plan_id / "plan.json").read_bytes())


def test_plan_is_stored_with_its_predictions(planned: tuple[Store, Path]) -> None:
    store, out = planned
    plan = _plan_json(store)
    assert plan["item_set"] == "sim-next"
    assert plan["kind"] == "crossed"
    assert plan["counts"] == {"systems": 6, "items": 24, "judges": 3}
    for key in ("mdd95", "erho2"):
        p = plan["predictions"][key]
        assert p["low"] < p["point"] < p["high"]
    stored = pl.read_parquet(Path(store.url) / "plans" / "p1" / "assignments.parquet")
    assert stored.equals(pl.read_csv(out, schema=stored.schema))
    assert stored.height == 6 * 24 * 3  # crossed: every judge on every cell


def _run(store: Store, run_id: str) -> tuple[dict, str, pl.DataFrame]:
    summary, printed = fit_publish_and_print(store, load_config(_config(store), environ={}), run_id)
    dstudy = pl.read_parquet(Path(store.url) / "results" / run_id / "dstudy.parquet")
    page = (Path(store.url) / "results" / run_id / "report" / "index.html").read_text()
    for row in summary["plans"]:  # the terminal says each comparison too
        assert f"plan {row['plan_id']} on {row['item_set']}: planned" in printed
    return summary, page, dstudy


def test_the_run_of_the_planned_judgments_is_set_beside_the_plan(planned: tuple[Store, Path], tmp_path: Path) -> None:
    store, _ = planned
    summary, page, _ = _run(store, "r0")
    assert summary["plans"] == []  # the planned judgments have not landed
    _ingest(store, tmp_path, "next", seed=2, n_systems=6, n_items=24, n_judges=3, item_set="sim-next")
    summary, page, dstudy = _run(store, "r1")
    plan = _plan_json(store)
    rows = {r["quantity"]: r for r in summary["plans"]}
    assert set(rows) == {"mdd95", "erho2"}
    for key, row in rows.items():
        realised = dstudy.filter((pl.col("item_set") == "sim-next") & (pl.col("quantity") == key)
                                 & (pl.col("universe") == "all") & (pl.col("population") == "all"))
        assert row["realised"] == pytest.approx(realised["estimate"].item(), rel=1e-12)
        p = plan["predictions"][key]
        assert (row["predicted"], row["predicted_low"], row["predicted_high"]) == (p["point"], p["low"], p["high"])
        assert row["inside"] == (p["low"] <= row["realised"] <= p["high"])
        assert row["realised_sizes"] == {"systems": 6, "items": 24, "judges": 3}
    assert 'id="plans"' in page
    assert "Plans against their runs" in page


def test_a_run_noisier_than_planned_is_alerted_by_name(planned: tuple[Store, Path], tmp_path: Path) -> None:
    store, _ = planned
    # The same design, every interaction with the systems and the residual four times as large (SD x 4).
    _ingest(store, tmp_path, "next", seed=3, n_systems=6, n_items=24, n_judges=3, item_set="sim-next",
            sigma_si=2.4, sigma_sj=1.2, sigma_sij=1.6, sigma_e=2.0)
    summary, page, _ = _run(store, "r1")
    mdd = next(r for r in summary["plans"] if r["quantity"] == "mdd95")
    assert mdd["inside"] is False
    assert mdd["realised"] > mdd["predicted_high"]
    alerts = summary["headlines"]["alerts"]
    said = [a for a in alerts if a.startswith("plan p1 on sim-next: planned MDD95")]
    assert len(said) == 1, alerts
    assert "outside the prediction's 95% interval" in said[0]
    assert "OUTSIDE" in page


def test_a_run_that_did_not_follow_the_plan_is_told_so(planned: tuple[Store, Path], tmp_path: Path) -> None:
    store, _ = planned
    _ingest(store, tmp_path, "next", seed=2, n_systems=6, n_items=12, n_judges=3, item_set="sim-next")
    summary, _, _ = _run(store, "r1")
    assert all(r["inside"] is None for r in summary["plans"])
    assert all("not the plan's" in r["reason"] for r in summary["plans"])
    said = [a for a in summary["headlines"]["alerts"] if a.startswith("plan p1 on sim-next: the run judged")]
    assert len(said) == 1
    assert "'items': 12" in said[0]
    assert "'items': 24" in said[0]


def test_round_robin_plan_says_why_it_has_no_prediction(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    _ingest(store, tmp_path, "tonight", seed=1, n_systems=4, n_items=12, n_judges=3)
    result = CliRunner().invoke(app, ["plan", "--config", str(_config(store)), "--item-set", "sim-chat", "--plan-id", "rr",
                                      "--out", str(tmp_path / "rr.csv")])
    assert result.exit_code == 0, result.output
    assert "not predicted: a round robin gives each system-item cell one judge" in result.output
    plan = orjson.loads((Path(store.url) / "plans" / "rr" / "plan.json").read_bytes())
    assert plan["predictions"] == {"mdd95": None, "erho2": None, "var_all_judges": None, "var_random_judge": None,
                                   "var_round_robin": None}
    # One generation per item: CyclicJudge cannot run, and the strategy variances say so.
    assert "needs at least two generations per scenario" in plan["null_reasons"]["var_round_robin"]
    assert "variance with the round robin (C): not predicted: CyclicJudge cannot run" in " ".join(result.output.split())
    assert plan["item_set"] == "sim-chat-rr"


def test_a_round_robin_plan_stores_each_strategys_variance_and_the_run_does_not_compare_them(tmp_path: Path) -> None:
    """With generations, tonight's CyclicJudge fit gives the plan eq. 3-5 at its sizes with intervals; the run's
    comparison carries them with the reason a run cannot measure them (stats checked in test_strategy_prediction)."""
    from jurymeter.pipeline.plans import load_plans, plan_checks
    from jurymeter.stats.cyclic.fit import mean_components

    store = Store(str(tmp_path / "store"))
    _ingest(store, tmp_path, "tonight", seed=1, n_systems=3, n_items=12, n_judges=3, n_generations=2)
    result = CliRunner().invoke(app, ["plan", "--config", str(_config(store)), "--item-set", "sim-chat",
                                      "--plan-id", "rr", "--generations", "6", "--out", str(tmp_path / "rr.csv")])
    assert result.exit_code == 0, result.output
    plan = _plan_json_of(store, "rr")
    assert plan["source"]["cyclic_fit"] == "fitted by plan"
    cyclic = CliRunner().invoke(app, ["cyclic", "--config", str(_config(store)), "--item-set", "sim-chat", "--json"])
    assert cyclic.exit_code == 0, cyclic.output
    c = mean_components(orjson.loads(cyclic.output))  # the report the `cyclic` command prints, read independently
    n, budget, k = 12, 6, 3
    want = {"var_all_judges": (k * c.sigma2_generation + c.sigma2_residual) / (n * budget),
            "var_random_judge": (c.sigma2_generation + c.sigma2_judge + c.sigma2_residual) / (n * budget),
            "var_round_robin": (c.sigma2_generation + c.sigma2_residual) / (n * budget)}
    for key, value in want.items():
        p = plan["predictions"][key]
        assert p["point"] == pytest.approx(value, rel=1e-9), key
        assert p["low"] < p["point"] < p["high"]
    assert f"predicted variance with the round robin (C) {want['var_round_robin']:.3g}" in result.output
    plans, unreadable = load_plans(store)
    assert unreadable == []
    assert [p["plan_id"] for p in plans] == ["rr"]
    dstudy = pl.DataFrame({"item_set": ["sim-chat-rr"], "universe": ["all"], "population": ["all"],
                           "quantity": ["mdd95"], "estimate": [0.5], "low": [0.4], "high": [0.6]})
    rows = {r["quantity"]: r for r in plan_checks(plans, {"dstudy": dstudy}, {"fits": []})}
    for key in want:
        assert rows[key]["inside"] is None
        assert rows[key]["predicted"] == plan["predictions"][key]["point"]
        assert rows[key]["reason"].startswith("not measured by a run")
    # A cost-weighted plan: its own variance is the one the planner prints (plan_variance on its rows, fitted
    # from the same report), without the scenario term.
    cost = CliRunner().invoke(app, ["plan", "--config", str(_config(store)), "--item-set", "sim-chat", "--plan-id", "cw",
                                    "--price", "judge-a=1", "--price", "judge-b=2", "--price", "judge-c=4",
                                    "--budget", str(12 * 14), "--out", str(tmp_path / "cw.csv")])
    assert cost.exit_code == 0, cost.output
    printed = float(cost.output.split("cost-weighted plan: predicted variance ")[1].split()[0])
    p = _plan_json_of(store, "cw")["predictions"]["var_cost_weighted"]
    assert p["point"] + c.sigma2_scenario / n == pytest.approx(printed, rel=1e-5)  # printed to 6 digits
    assert p["low"] < p["point"] < p["high"]


def test_plan_flags_errors(planned: tuple[Store, Path], tmp_path: Path) -> None:
    store, _ = planned
    base = ["plan", "--store", store.url, "--item-set", "sim-chat", "--out", str(tmp_path / "x.csv")]
    again = CliRunner().invoke(app, [*base, "--crossed", "--plan-id", "p1"])
    assert again.exit_code == 1
    assert "--plan-id 'p1': a plan of that id is already stored" in again.output
    bad = CliRunner().invoke(app, [*base, "--plan-id", "../up"])
    assert bad.exit_code == 1
    assert "--plan-id '../up'" in bad.output
    both = CliRunner().invoke(app, [*base, "--crossed", "--price", "judge-a=1", "--budget", "3"])
    assert both.exit_code == 1
    assert "--crossed" in both.output
    for flags, said in ((["--target-mdd", "-1"], "--target-mdd must be a positive number"),
                        (["--target-mdd", "nan"], "--target-mdd must be a positive number"),
                        (["--target-erho2", "1"], "--target-erho2 must be between 0 and 1"),
                        (["--target-mdd", "1", "--target-erho2", "0.8"], "give one of --target-mdd and --target-erho2"),
                        (["--next-item-set", " "], "--next-item-set must name the item set"),
                        (["--batch-size", "4"], "--batch-size orders a judge's items for a system in batches"),
                        (["--crossed", "--batch-size", "1"], "--batch-size must be at least 2, got 1"),
                        (["--universe", "nonesuch"], "--universe 'nonesuch': no universe 'nonesuch' in the config")):
        refused = CliRunner().invoke(app, [*base, *flags])
        assert refused.exit_code == 1, flags
        assert said in refused.output, refused.output
        assert not (tmp_path / "x.csv").exists()
    assert "Traceback" not in again.output + bad.output + both.output


def test_an_unreadable_plan_is_an_alert_not_a_crash(planned: tuple[Store, Path], tmp_path: Path) -> None:
    store, _ = planned
    good = _plan_json(store)
    bad = {
        "p2": b'{"plan_id": "p2", "predic',  # cut
        "p3": orjson.dumps([good]),
        "p4": orjson.dumps({**good, "counts": {"items": "24"}}),
        "p5": orjson.dumps({**good, "predictions": {"mdd95": {"point": "0.4", "low": 0.3, "high": 0.5}}}),
        "p6": orjson.dumps({**good, "item_set": None}),
        "p7": orjson.dumps({**good, "counts": {"items": True}}),
    }
    for plan_id, data in bad.items():
        (Path(store.url) / "plans" / plan_id).mkdir()
        (Path(store.url) / "plans" / plan_id / "plan.json").write_bytes(data)
    _ingest(store, tmp_path, "next", seed=2, n_systems=6, n_items=24, n_judges=3, item_set="sim-next")
    summary, _, _ = _run(store, "r1")
    alerts = summary["headlines"]["alerts"]
    assert any(a.startswith("plan p2: plans/p2/plan.json cannot be read") for a in alerts)
    for plan_id in ("p3", "p4", "p5", "p6", "p7"):
        assert any(a.startswith(f"plan {plan_id}: plans/{plan_id}/plan.json is not a plan record (") for a in alerts)
    assert {r["plan_id"] for r in summary["plans"]} == {"p1"}  # the good plan is still measured


def test_a_henderson_report_predicts_as_the_balanced_one_on_balanced_data(tmp_path: Path) -> None:
    """On complete data Henderson's chi-square draws are the balanced path's (henderson.chisquare_draws), so a plan
    predicted from either estimator's report is the same: the report's ems_coefficients carry Henderson's C."""
    from jurymeter.analyses.gstudy.plan import plan_predictions

    store = Store(str(tmp_path / "store"))
    _ingest(store, tmp_path, "tonight", seed=4, n_systems=5, n_items=16, n_judges=3)
    reports = {}
    for estimator in ("balanced", "henderson"):
        got = CliRunner().invoke(app, ["gstudy", "--store", store.url, "--item-set", "sim-chat", "--boot", "300",
                                       "--estimator", estimator, "--henderson-intervals", "chisquare", "--json"])
        assert got.exit_code == 0, got.output
        reports[estimator] = orjson.loads(got.stdout)
    assert reports["henderson"]["estimator"] == "henderson"
    assert "ems_coefficients" not in reports["balanced"]
    counts = {"systems": 5, "items": 40, "judges": 4}
    balanced, _ = plan_predictions(reports["balanced"], counts, crossed=True, seed=9)
    henderson, reasons = plan_predictions(reports["henderson"], counts, crossed=True, seed=9)
    assert reasons == {}
    for key in ("mdd95", "erho2"):
        b, h = balanced[key], henderson[key]
        assert b is not None
        assert h is not None
        assert (h.point, h.low, h.high) == pytest.approx((b.point, b.low, b.high), rel=1e-8)


def test_a_plan_after_the_run_reads_the_runs_fit_and_predicts_as_a_refit(planned: tuple[Store, Path],
                                                                          tmp_path: Path) -> None:
    store, _ = planned
    _run(store, "r0")  # the nightly run fits sim-chat: its G-study is in the fit cache
    result = CliRunner().invoke(app, ["plan", "--config", str(_config(store)), "--item-set", "sim-chat", "--crossed",
                                      "--plan-id", "p2", "--next-item-set", "sim-next-2",
                                      "--out", str(tmp_path / "p2.csv")])
    assert result.exit_code == 0, result.output
    assert "predicted from the run's G-study of these records" in result.output
    first, second = _plan_json(store), orjson.loads((Path(store.url) / "plans" / "p2" / "plan.json").read_bytes())
    assert first["source"]["fit"] == "fitted by plan"
    assert second["source"]["fit"] == "the run's fit (cache)"
    assert second["predictions"] == first["predictions"]  # p1 was fitted by plan on the same records and settings


def test_a_target_mdd_sizes_the_plan_to_the_fewest_calls_reaching_it(planned: tuple[Store, Path],
                                                                      tmp_path: Path) -> None:
    store, _ = planned
    got = CliRunner().invoke(app, ["gstudy", "--config", str(_config(store)), "--item-set", "sim-chat", "--json"])
    components = {k.removeprefix("sigma2_"): v["raw"] for k, v in orjson.loads(got.stdout)["components"].items()}

    def mdd(n_i: int, n_j: int) -> float:  # s x i x j, Brennan (2001) eq. 4.12
        return 1.959963984540054 * (2 * (components["si"] / n_i + components["sj"] / n_j
                                         + components["sij"] / (n_i * n_j))) ** 0.5

    target = round(0.5 * (mdd(24, 3) + mdd(6, 2)), 3)  # between the full design and a small one
    best = min(((i, j) for i in range(2, 25) for j in range(2, 4) if mdd(i, j) <= target),
               key=lambda ij: (ij[0] * ij[1], ij[1]))
    result = CliRunner().invoke(app, ["plan", "--config", str(_config(store)), "--item-set", "sim-chat",
                                      "--target-mdd", str(target), "--plan-id", "sized", "--out",
                                      str(tmp_path / "sized.csv")])
    assert result.exit_code == 0, result.output
    plan = orjson.loads((Path(store.url) / "plans" / "sized" / "plan.json").read_bytes())
    assert plan["kind"] == "crossed"
    assert (plan["counts"]["items"], plan["counts"]["judges"]) == best
    assert plan["predictions"]["mdd95"]["point"] == pytest.approx(mdd(*best), rel=1e-9)
    assert pl.read_csv(tmp_path / "sized.csv").height == 6 * best[0] * best[1]
    far = CliRunner().invoke(app, ["plan", "--config", str(_config(store)), "--item-set", "sim-chat",
                                   "--target-mdd", "0.01", "--out", str(tmp_path / "far.csv")])
    assert far.exit_code == 1
    assert "no crossed plan within the item set's 24 items and 3 judges reaches MDD95 <= 0.01" in far.output
    assert not (tmp_path / "far.csv").exists()


def test_a_plan_in_a_judge_universe_takes_its_judges_and_its_g_study(planned: tuple[Store, Path],
                                                                     tmp_path: Path) -> None:
    # The G-study's advice for judges who never share systems is "fit one judge universe at a time";
    # a plan follows it: --universe names the judges and the G-study (the one of those judges) it predicts from.
    store, _ = planned
    config = _config(store)
    config.write_text(config.read_text() + '[universes]\npair = ["judge-a", "judge-b"]\n')
    out = tmp_path / "pair.csv"
    result = CliRunner().invoke(app, ["plan", "--config", str(config), "--item-set", "sim-chat", "--crossed",
                                      "--universe", "pair", "--plan-id", "p-pair", "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = pl.read_csv(out)
    assert sorted(table["judge_id"].unique().to_list()) == ["judge-a", "judge-b"]
    record = orjson.loads((Path(store.url) / "plans" / "p-pair" / "plan.json").read_bytes())
    assert record["source"]["universe"] == "pair"
    assert record["counts"]["judges"] == 2
    got = CliRunner().invoke(app, ["gstudy", "--config", str(config), "--item-set", "sim-chat", "--universe", "pair",
                                   "--json"])
    assert got.exit_code == 0, got.output
    report = orjson.loads(got.output)
    assert report["block"]["judges"] == 2
    # the prediction's point at the plan's own sizes is the D-study of the two judges' G-study
    assert record["predictions"]["erho2"]["point"] == pytest.approx(report["erho2"], rel=1e-9)


def test_a_batched_plan_stores_its_orders(planned: tuple[Store, Path], tmp_path: Path) -> None:
    store, _ = planned
    out = tmp_path / "batched.csv"
    result = CliRunner().invoke(app, ["plan", "--config", str(_config(store)), "--item-set", "sim-chat", "--crossed",
                                      "--batch-size", "6", "--plan-id", "p-batch", "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = pl.read_csv(out)
    # 24 items in batches of 6: 4 per judge and system, each a Williams-ordered batch of 6 positions
    assert table.height == 6 * 24 * 3
    assert table.group_by("batch_id").len()["len"].unique().to_list() == [6]
    assert table["batch_id"].n_unique() == 6 * 4 * 3
    record = orjson.loads((Path(store.url) / "plans" / "p-batch" / "plan.json").read_bytes())
    assert record["batches"] == {"size": 6, "design": "williams", "batches": 72}
    stored = pl.read_parquet(Path(store.url) / "plans" / "p-batch" / "assignments.parquet")
    assert stored.sort(stored.columns).equals(table.sort(table.columns).cast(stored.schema))


def test_a_priced_target_takes_the_cheapest_judges_and_says_the_cost(planned: tuple[Store, Path],
                                                                     tmp_path: Path) -> None:
    store, _ = planned
    base = ["plan", "--config", str(_config(store)), "--item-set", "sim-chat", "--target-mdd", "0.9"]
    prices = ["--price", "judge-a=3", "--price", "judge-b=1", "--price", "judge-c=1"]
    out = tmp_path / "priced.csv"
    result = CliRunner().invoke(app, [*base, *prices, "--plan-id", "p-priced", "--out", str(out)])
    assert result.exit_code == 0, result.output
    table = pl.read_csv(out)
    judges = sorted(table["judge_id"].unique().to_list())
    items = table["item_id"].n_unique()
    assert "judge-a" not in judges or len(judges) == 3  # the dear judge only when all three are needed
    cost = items * sum({"judge-a": 3, "judge-b": 1, "judge-c": 1}[j] for j in judges)
    assert f"least-cost plan reaching the target: {items} items x {len(judges)} judges" in result.output
    assert f"{cost:g} per system" in result.output
    missing = CliRunner().invoke(app, [*base, "--price", "judge-a=3", "--out", str(tmp_path / "x.csv")])
    assert missing.exit_code == 1
    assert "--price must give a price for each of the item set's judges" in missing.output
    both = CliRunner().invoke(app, [*base, *prices, "--budget", "9", "--out", str(tmp_path / "x.csv")])
    assert both.exit_code == 1
    assert "--budget sizes the cost-weighted plan" in both.output


def test_several_item_sets_are_planned_in_one_call(planned: tuple[Store, Path], tmp_path: Path) -> None:
    store, _ = planned
    _ingest(store, tmp_path, "second", seed=2, n_systems=5, n_items=12, n_judges=3, item_set="sim-two")
    base = ["plan", "--config", str(_config(store)), "--item-set", "sim-chat", "--item-set", "sim-two", "--crossed"]
    out = tmp_path / "plans"
    result = CliRunner().invoke(app, [*base, "--out", str(out)])
    assert result.exit_code == 0, result.output
    tables = {p.stem: pl.read_csv(p) for p in out.iterdir()}
    assert sorted(tables) == ["sim-chat", "sim-two"]
    assert tables["sim-two"]["item_id"].n_unique() == 12
    assert tables["sim-two"]["system_id"].n_unique() == 5
    records = [orjson.loads(p.read_bytes()) for p in (Path(store.url) / "plans").glob("*/plan.json")]
    by_source = {r["source"]["item_set"]: r for r in records if r["plan_id"] != "p1"}
    assert sorted(by_source) == ["sim-chat", "sim-two"]
    assert by_source["sim-two"]["item_set"] == f"sim-two-{by_source['sim-two']['plan_id']}"
    assert by_source["sim-two"]["counts"] == {"systems": 5, "items": 12, "judges": 3}
    named = CliRunner().invoke(app, [*base, "--plan-id", "x", "--out", str(tmp_path / "again")])
    assert named.exit_code == 1
    assert "--plan-id and --next-item-set name one plan" in named.output
    (tmp_path / "file.csv").write_text("")
    into_file = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "file.csv")])
    assert into_file.exit_code == 1
    assert "it is a folder" in into_file.output
