"""Alerts on what is wrong now (issue 24, point 2): reversals, slot bias, ceilings, MDD, failures, and [alerts].

Independent references: the simulator's truth (which judges follow position, with
what probability q) and the position-following model's reversal rate, written out
here ([Awuni2026] section 8): with no ties and no slot shift, a judge picking the
first slot with probability q, else the content winner (x with probability p),
reverses a pair with probability (q + (1-q)p)(1 - (1-q)p) + (1-q)^2 p(1-p), which is
at least q for every p, and 2p(1-p) <= 1/2 when q = 0.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from jurymeter.analyses.headlines import run_alerts
from jurymeter.errors import ConfigError
from jurymeter.pipeline.alerts import fit_alerts, judge_alerts, now_alerts
from jurymeter.pipeline.config import AlertConfig, load_config
from jurymeter.simulate import SimulationParams, simulate_dump
from jurymeter.stats.pairwise.games import games
from jurymeter.stats.pairwise.position import position_bias

NAMES = {"item_set": "sim-chat", "universe": "all", "population": "all"}
# position_bias's per-judge columns -> the published pairwise_judges columns
PUBLISHED = {"reversal_rate_low": "reversal_low", "reversal_rate_high": "reversal_high",
             "slot_a_advantage_low": "slot_a_low", "slot_a_advantage_high": "slot_a_high"}


def _judges_table(params: SimulationParams, n_boot: int = 200) -> pl.DataFrame:
    """One simulated night's pairwise_judges rows (as the pairwise analysis publishes them)."""
    dump = simulate_dump(params)
    per_judge = position_bias(games(dump.pairwise), n_boot=n_boot, seed=params.seed).per_judge
    return per_judge.rename(PUBLISHED).with_columns(**{k: pl.lit(v) for k, v in NAMES.items()})


def _alerted(table: pl.DataFrame, kind: str) -> set[str]:
    return {line.split()[1] for line in judge_alerts(table, AlertConfig()) if kind in line}


def _reversal(q: float, p: float) -> float:
    return (q + (1 - q) * p) * (1 - (1 - q) * p) + (1 - q) ** 2 * p * (1 - p)


def test_the_model_reversal_rate_is_above_a_coin_exactly_when_the_judge_follows_position() -> None:
    for p in (0.0, 0.1, 0.3, 0.5, 0.8, 1.0):
        assert _reversal(0.0, p) == pytest.approx(2 * p * (1 - p))
        assert _reversal(0.0, p) <= 0.5
        assert _reversal(0.6, p) >= 0.6 - 1e-12


# The demo's panel (five judges, twelve systems, sixty items), no ties and no slot shift, so that only
# position following can lift a judge's reversal rate above 1/2 (the module docstring).
FOLLOWING = {"judge-a": 0.7, "judge-d": 0.6}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_position_following_judge_is_alerted_and_no_other(seed: int) -> None:
    params = SimulationParams(seed=seed, n_generations=1, n_replicates=1, tie_threshold=0.0, position_bias=0.0,
                              sigma_position=0.0, position_following=FOLLOWING)
    table = _judges_table(params)
    assert set(table["judge_id"]) == {"judge-a", "judge-b", "judge-c", "judge-d", "judge-e"}
    assert _alerted(table, "reverses") == set(FOLLOWING)
    # following the first slot is also a slot-A advantage far past the margin; the others have none
    assert _alerted(table, "slot") == set(FOLLOWING)
    line = next(a for a in judge_alerts(table, AlertConfig()) if a.startswith("judge judge-a") and "reverses" in a)
    assert "sim-chat (pairwise) / all / all" in line
    assert "randomize or counterbalance the order" in line


def test_on_the_demos_own_data_a_judge_is_alerted_exactly_when_its_reversal_rate_is_above_a_coin() -> None:
    """The demo's simulation as it is (ties and a slot shift, no position following): each judge's reference
    reversal rate is that of the same panel on ten times the items; the ones clearly above 1/2 (all five:
    a tie in one order and a win in the other is a reversal) are alerted, and clearly below would not be."""
    demo = SimulationParams()  # what `jurymeter demo` simulates (cli/plans.simulate_dump_to, 12 systems)
    table = _judges_table(demo)
    reference = _judges_table(replace(demo, n_items=10 * demo.n_items), n_boot=20)
    rates = dict(reference.select("judge_id", "reversal_rate").iter_rows())
    above = {j for j, r in rates.items() if r > 0.52}
    below = {j for j, r in rates.items() if r < 0.48}
    assert above | below == set(rates)  # no judge too near a coin to call
    assert _alerted(table, "reverses") == above


def test_stable_judges_are_alerted_at_most_at_about_the_nominal_rate() -> None:
    """Judges that are exactly coins on reversals (equal systems, no ties, no following): the interval's
    low end passes 1/2 one-sidedly at about 2.5 %; over 40 nights x 3 judges, 3 expected.

    The bound (at most 10 of 120) fails with probability about 0.001 when the rate is 2.5 %; an
    interval too narrow by half (a 17 % one-sided rate) would give about 20.
    """
    nights, alerts_seen, slot_alerts = 40, 0, 0
    for night in range(nights):
        params = SimulationParams(seed=100 + night, n_systems=6, n_items=30, n_judges=3, n_generations=1,
                                  n_replicates=1, pairwise_pairs=None, theta_per_point=0.0, tie_threshold=0.0,
                                  position_bias=0.0, sigma_position=0.0, family_preference=0.0,
                                  weighted_fraction=0.0)
        table = _judges_table(params, n_boot=300)
        alerts_seen += len(_alerted(table, "reverses"))
        slot_alerts += len(_alerted(table, "slot"))
    trials = 3 * nights
    tail = sum(math.comb(trials, k) * 0.025 ** k * 0.975 ** (trials - k) for k in range(11, trials + 1))
    assert tail < 0.002
    assert alerts_seen <= 10, f"{alerts_seen} reversal alerts of {trials} stable judge-nights"
    assert slot_alerts <= 10, f"{slot_alerts} slot alerts of {trials} stable judge-nights"


def _judge_row(judge: str, **values: float | None) -> dict[str, object]:
    row: dict[str, object] = {**NAMES, "judge_id": judge, "reversal_rate": 0.4, "reversal_low": 0.35,
                              "reversal_high": 0.45, "slot_a_advantage": 0.0, "slot_a_low": -3.0, "slot_a_high": 3.0}
    return {**row, **values}


def test_the_slot_margin_is_the_configured_one_both_sides() -> None:
    rows = [_judge_row("plus", slot_a_advantage=9.0, slot_a_low=6.0, slot_a_high=12.0),
            _judge_row("minus", slot_a_advantage=-9.0, slot_a_low=-12.0, slot_a_high=-6.0),
            _judge_row("small", slot_a_advantage=4.0, slot_a_low=2.0, slot_a_high=6.0),
            _judge_row("null", slot_a_advantage=None, slot_a_low=None, slot_a_high=None, reversal_low=None)]
    table = pl.DataFrame(rows)
    assert {a.split()[1] for a in judge_alerts(table, AlertConfig())} == {"plus", "minus"}
    assert {a.split()[1] for a in judge_alerts(table, AlertConfig(position_margin=1.0))} == {"plus", "minus", "small"}
    assert judge_alerts(table, AlertConfig(position_margin=7.0)) == []
    twice = pl.concat([table, table.with_columns(universe=pl.lit("three"))])
    folded = judge_alerts(twice, AlertConfig())
    assert [a.split(" (also")[0] for a in folded] == ["judge plus on sim-chat (pairwise) / all / all",
                                                      "judge minus on sim-chat (pairwise) / all / all"]
    assert all("(also in 1 other fit) favours" in a for a in folded)
    minus = judge_alerts(table, AlertConfig())[1]
    assert "second slot by -9.0 points [-12.0, -6.0]" in minus
    assert "counterbalance" in minus


def _dstudy(ceiling: float | None, mdd: float | None) -> pl.DataFrame:
    return pl.DataFrame([{**NAMES, "quantity": "ceiling", "estimate": ceiling, "low": None, "high": None, "reason": None},
                         {**NAMES, "quantity": "mdd95", "estimate": mdd, "low": None, "high": None, "reason": None}],
                        schema_overrides={"estimate": pl.Float64, "low": pl.Float64, "high": pl.Float64,
                                          "reason": pl.String})


def test_a_ceiling_below_the_target_and_an_mdd_above_the_maximum_are_alerts() -> None:
    tables = {"dstudy": _dstudy(0.62, 0.41)}
    assert fit_alerts(tables, AlertConfig(), 0.8) == [
        "fit sim-chat / all / all: one judge's ceiling 0.62 is below the target 0.8: more items cannot reach it "
        "with one judge; average several judges"]
    assert fit_alerts(tables, AlertConfig(), 0.6) == []
    assert fit_alerts({"dstudy": _dstudy(None, None)}, AlertConfig(max_mdd=0.1), 0.8) == []
    lines = fit_alerts(tables, AlertConfig(max_mdd=0.4), 0.6)
    assert len(lines) == 1
    assert "MDD95 0.41 points is above the maximum 0.4" in lines[0]
    assert fit_alerts(tables, AlertConfig(max_mdd=0.41), 0.6) == []
    assert now_alerts(tables, AlertConfig(max_mdd=0.4), 0.6) == lines  # no pairwise table: the fits' alerts


def test_the_failed_share_threshold_is_configurable() -> None:
    summary = {"judges": [{"judge_id": "j1", "stored": 97, "failed": 3, "failed_share": 0.03}]}
    assert run_alerts(summary) == []
    [line] = run_alerts(summary, failed_share=0.03)
    assert line.startswith("judge j1: 3.0% of its judgments failed (3 of 100)")


def test_alerts_and_gates_tables_are_read_and_checked(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[alerts]\nposition_margin = 2\nmax_mdd = 0.5\n[gates]\nmin_erho2 = 0.7\nmax_failure = 0.1\n")
    loaded = load_config(config, environ={})
    assert loaded.alerts == AlertConfig(position_margin=2.0, failed_share=0.05, max_mdd=0.5)
    assert (loaded.gates.min_erho2, loaded.gates.max_failure, loaded.gates.max_mdd) == (0.7, 0.1, None)
    assert load_config(None, environ={}).alerts == AlertConfig()
    for body, named in [("[alerts]\nfailed_share = 1.5\n", "[alerts] failed_share must be in (0, 1)"),
                        ("[alerts]\nmax_mdd = -1\n", "[alerts] max_mdd must be above 0"),
                        ("[gates]\nmax_reversal = 'x'\n", "[gates] max_reversal must be float"),
                        ("[gates]\nmax_mdd = 0\n", "[gates] max_mdd must be above 0"),
                        ("[alerts]\ncoin = 1\n", "[alerts]: unknown key(s) coin")]:
        config.write_text(body)
        with pytest.raises(ConfigError, match=named.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
            load_config(config, environ={})


def test_a_published_run_says_its_alerts_on_the_index_and_in_summary_json(tmp_path: Path) -> None:
    """The publish path: the alerts of the run's own tables, in ``summary.json`` headlines and on the page."""
    import html

    from jurymeter.io.store import Store
    from jurymeter.pipeline.publish import read_run
    from published import publish_small_run

    root = publish_small_run(tmp_path, "r1")
    tables, summary = read_run(Store(str(root)), "results/r1")
    expected = now_alerts(tables, AlertConfig(), 0.8)
    assert any("reverses" in a for a in expected)  # the default simulation's ties and slot shift: above a coin
    said = summary["headlines"]["alerts"]
    start = said.index(expected[0])
    assert said[start:start + len(expected)] == expected
    page = (root / "results" / "r1" / "report" / "index.html").read_text()
    for alert in expected:
        assert html.escape(alert, quote=False) in page or html.escape(alert) in page
