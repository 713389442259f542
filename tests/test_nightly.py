"""The nightly run: configuration, fit keys, tables, cache; and the real flow end to end.

Independent references: the E rho^2 curve against the crossed-design formula
written out by hand (paper section 5), the published tables against the fit
report they come from, and for the flow, what a reader finds in the store
afterwards (summary, tables, report, cache) on three engines: a LocalCluster,
a multi-process cluster started by ``infra/scripts/dask-cluster.sh``, and an
S3 store on moto's standalone server.
"""

from __future__ import annotations

import copy
import functools
import logging
import math
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest

from flow_util import free_port, start_ready, stop_group, venv_env
from jurymeter.analyses import registered
from jurymeter.errors import ConfigError
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.pipeline.cache import read_cached, write_cached
from jurymeter.pipeline.config import RunConfig, load_config
from jurymeter.pipeline.fit import fit_and_tabulate, fit_modules, run_fit
from jurymeter.pipeline.jobs import FitJob, plan_fits
from jurymeter.simulate import SimulationParams, simulate_dump, write_dump

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ configuration


def test_config_precedence_file_then_environment_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "jm.toml"
    path.write_text(
        'store = "from-file"\n[dask]\nworkers = 3\n[fit]\nn_boot = 100\n'
        '[universes]\npanel = ["a", "b"]\n'
    )
    config = load_config(path, environ={"JURYMETER_N_BOOT": "200", "DASK_SCHEDULER_ADDRESS": "tcp://x:1"})
    assert (config.store, config.dask.workers, config.fit.n_boot) == ("from-file", 3, 200)
    assert config.dask.address == "tcp://x:1"
    assert config.universes == {"panel": ("a", "b")}
    flagged = load_config(path, environ={"JURYMETER_N_BOOT": "200"}, overrides={"fit.n_boot": 5, "store": None})
    assert (flagged.fit.n_boot, flagged.store) == (5, "from-file")
    assert load_config(None, environ={}) == RunConfig()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("stor = 'x'\n", "unknown key(s) stor"),
        ("[fit]\nuniverses = ['panel']\n", "does not define"),
        ("[dask]\nworkers = 'many'\n", "workers must be int"),
        ("[universes]\npanel = []\n", "non-empty list"),
        ("store = \n", "not valid TOML"),
    ],
)
def test_bad_config_is_one_clear_error_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        load_config(path, environ={})
    assert "bad.toml" in str(info.value)


def test_digest_leaves_credentials_out() -> None:
    a = RunConfig(storage_options={"secret": "one"})
    b = RunConfig(storage_options={"secret": "two"})
    assert a.digest() == b.digest()
    assert "one" not in orjson.dumps(a.digest()).decode()


# ------------------------------------------------------------------ fits


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    from jurymeter.io.ingest import ingest
    from jurymeter.io.validate import ValidationOptions

    root = tmp_path_factory.mktemp("nightly")
    params = SimulationParams(n_systems=6, n_items=24, n_judges=4, pairwise_pairs=6, seed=3)
    paths = write_dump(simulate_dump(params), root / "dump")
    store = Store(str(root / "store"))
    sources = [str(p) for name, p in paths.items() if name != "truth"]
    ingest(store, discover_sources(sources), ValidationOptions(scale=(1.0, 10.0)))
    return store


# The bootstrap draws of every fit here (and of the flow's runs below): the sequential GLMM's
# bootstrap is most of a fit's time (60 draws 6.4 CPU-s a fit of this store, 12 draws 1.6 s), and
# no assertion in this file depends on how many draws there are. Its own resamples and
# predictive-check sets (each a GLMM refit) fewer still: 2 (1.1 CPU-s a fit, 3.0 at 12; below
# that the GLMM's fixed cost, 0.4 s at 1, is most of it) keep every table and figure of it.
FEW_DRAWS = 12
SEQUENTIAL_DRAWS = "[fit.sequential]\nn_boot = 2\n"


def _config(store: Store, **fit: object) -> RunConfig:
    text = f'store = "{store.url}"\n[universes]\nthree = ["judge-a", "judge-b", "judge-c"]\n'
    text += f"[fit]\nuniverses = ['all', 'three']\nn_boot = {FEW_DRAWS}\n{SEQUENTIAL_DRAWS}"
    path = Path(store.root).parent / "jm.toml"
    path.write_text(text)
    return load_config(path, environ={}, overrides={f"fit.{k}": v for k, v in fit.items()})


def _pointwise_jobs(store: Store, **fit: object) -> list:
    """The plan's G-study and CyclicJudge fits (the simulated store also holds a pairwise item set)."""
    return [j for j in plan_fits(store, _config(store, **fit)).jobs if j.protocol == "pointwise"]


def _blocks_only(job: FitJob) -> FitJob:
    """``job`` without the sequential analysis: it reads no block (``modes()`` is empty, it is fed no
    chunk) and ignores the generation mode, and its GLMM refits were 90 % of a pointwise fit here."""
    from dataclasses import replace

    from jurymeter.analyses import analysis

    assert analysis("sequential").modes(job.settings, None) == ()
    kept = tuple(a for a in job.analyses if a[0] != "sequential")
    assert [name for name, _ in kept] == ["gstudy", "cyclic"], job.analyses
    return replace(job, analyses=kept)


def test_fit_keys_follow_inputs_and_request_not_location(small_store: Store) -> None:
    config = _config(small_store)
    jobs = [j for j in plan_fits(small_store, config).jobs if j.protocol == "pointwise"]
    assert [(j.item_set, j.universe, j.population) for j in jobs] == [
        ("sim-chat", "all", "all"), ("sim-chat", "three", "all")
    ]
    assert len({j.key() for j in jobs}) == 2
    again = _pointwise_jobs(small_store)
    assert [j.key() for j in again] == [j.key() for j in jobs]
    more_boot = plan_fits(small_store, _config(small_store, n_boot=FEW_DRAWS + 1)).jobs
    assert {j.key() for j in more_boot}.isdisjoint({j.key() for j in jobs})
    from dataclasses import replace

    moved = replace(jobs[0], store="s3://elsewhere/store")
    assert moved.key() == jobs[0].key()
    grown = replace(jobs[0], inputs=(*jobs[0].inputs, "data/protocol=pointwise/item_set=sim-chat/part-x.parquet"))
    assert grown.key() != jobs[0].key()


@pytest.fixture(scope="module")
def fitted(small_store: Store):
    job = plan_fits(small_store, _config(small_store)).jobs[0]
    result = fit_and_tabulate(job, figures=True)
    assert result.error is None, result.trace
    return job, result


def test_a_fit_read_in_item_chunks_gives_the_report_of_one_scan_and_of_a_scan_per_block(
    small_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jurymeter.pipeline.fit_cells as fit_cells
    import jurymeter.stats.blocks as blocks
    from jurymeter.analyses import analysis

    monkeypatch.setattr(fit_cells, "cell_chunks", lambda job, modes: None)  # the records' scans, chunked
    presence = blocks._presence
    scans: list[int] = []

    def counted_presence(*args: object) -> np.ndarray:
        scans.append(1)
        return presence(*args)  # type: ignore[arg-type]

    def reports(job: object) -> dict[str, object]:
        return {name: analysis(name).report(o.result) for name, o in run_fit(job).items()}  # type: ignore[arg-type]

    for job in map(_blocks_only, _pointwise_jobs(small_store)):
        shared = reports(job)
        assert shared["cyclic"] is not None  # the simulated panel has generations: both blocks ran
        assert "systems" in shared["cyclic"], shared["cyclic"]
        scans.clear()
        with monkeypatch.context() as patched:
            patched.setattr(blocks, "CHUNK_CELLS", 1)  # one item per chunk
            cut = {name: analysis(name).report(o.result) for name, o in run_fit(job, scan_cells=10**7).items()}
            patched.setattr(blocks, "_presence", counted_presence)
            chunked = reports(job)
            assert scans == []  # a complete panel: the chunks' counts confirm every cell, no presence scan
            patched.setattr(blocks, "fit_chunks", functools.partial(blocks.fit_chunks, speculate=False))
            scanned = reports(job)
        assert scans == [1]  # the chunked path ran: a presence scan, then the chunks
        with monkeypatch.context() as patched:  # no dense path: each block by polars, a scan each
            patched.setattr(blocks, "_cell_levels", lambda lazy, keys: None)
            separate = reports(job)
        _assert_close(shared, chunked)
        _assert_close(shared, separate)
        assert _json(chunked) == _json(scanned)  # the same sums in the same order: the same bits
        assert _json(cut) == _json(scanned)


def _json(report: object) -> bytes:
    import orjson

    return orjson.dumps(report, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY)


@pytest.mark.parametrize("where", ["first", "middle"])  # read before the analyses start, or met while feeding them
def test_a_fit_whose_blocks_assumed_no_hole_and_meet_one_starts_over_with_the_blocks_of_a_presence_scan(
    small_store: Store, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    import dataclasses

    import jurymeter.pipeline.fit as fit_module
    import jurymeter.pipeline.fit_cells as fit_cells
    import jurymeter.stats.blocks as blocks
    from jurymeter.analyses import analysis

    monkeypatch.setattr(fit_cells, "cell_chunks", lambda job, modes: None)  # the records' scans (a hole cut in them)
    job = plan_fits(small_store, _config(small_store)).jobs[0]
    # The G-study alone: generations averaged, so the cells (system, item, judge,
    # replicate) hold a record per generation and a hole leaves more records than cells.
    job = dataclasses.replace(job, analyses=tuple(a for a in job.analyses if a[0] == "gstudy"))
    scope_of = fit_module.fit_scope

    def holey(job: object, mapper: object = map) -> object:
        scope = scope_of(job, mapper)  # type: ignore[arg-type]
        items = sorted(scope.records.select("item_id").unique().collect()["item_id"])
        hole = (pl.col("item_id") == items[0 if where == "first" else len(items) // 2]) & (pl.col("judge_id") == "judge-b")
        return dataclasses.replace(scope, records=scope.records.filter(~hole))

    settled: list[int] = []
    settle = blocks.FitChunks._settle

    def counted_settle(self: object, *args: object) -> None:
        settled.append(1)
        settle(self, *args)  # type: ignore[arg-type]

    def reports() -> dict[str, object]:
        return {name: analysis(name).report(o.result) for name, o in fit_module.run_fit(job).items()}

    monkeypatch.setattr(fit_module, "fit_scope", holey)
    monkeypatch.setattr(blocks, "CHUNK_CELLS", 1)  # one item per chunk: the hole is in a middle chunk
    monkeypatch.setattr(blocks.FitChunks, "_settle", counted_settle)
    changed: list[int] = []
    parts = blocks.FitChunks.parts

    def counted_parts(self: object) -> object:
        try:
            yield from parts(self)  # type: ignore[arg-type]
        except blocks.BlocksChanged:
            changed.append(1)
            raise

    monkeypatch.setattr(blocks.FitChunks, "parts", counted_parts)
    speculated = reports()
    assert settled == [1]  # the chunks' counts met the hole once
    # In the first chunk (read while the imports run) before any analysis starts; later, the fit starts over.
    assert changed == ([] if where == "first" else [1])
    monkeypatch.setattr(blocks, "fit_chunks", functools.partial(blocks.fit_chunks, speculate=False))
    scanned = reports()
    assert settled == [1]
    # The hole makes the data incomplete: the default estimator fits every record, and says what the block drops.
    assert speculated["gstudy"]["estimator"] == "henderson"  # type: ignore[index]
    assert speculated["gstudy"]["balanced_block"]["dropped_items"]  # type: ignore[index]
    assert _json(speculated) == _json(scanned)


def test_generations_as_a_facet_fit_with_the_native_d_study_of_generations_averaged(small_store: Store) -> None:
    from jurymeter.pipeline.tables import fit_tables

    averaged = [_blocks_only(job) for job in _pointwise_jobs(small_store)]
    facet = [_blocks_only(job) for job in _pointwise_jobs(small_store, generations="facet")]
    assert [job.settings.generations for job in facet] == ["facet"] * len(averaged)
    for job_a, job_f in zip(averaged, facet, strict=True):
        outcomes_f = run_fit(job_f)
        a, f = run_fit(job_a)["gstudy"].result.report, outcomes_f["gstudy"].result.report
        assert f["design"] == "s x i x j x g:si x r:sijg"
        assert a["design"] == "s x i x j x r:sij"
        assert f["sizes"]["g"] == 2  # the small store simulates two generations
        # Averaging the generations of each cell is the native D-study of the facet design.
        for key in ("erho2", "mdd95", "sigma2_delta"):
            assert f[key] == pytest.approx(a[key], rel=1e-9), key
        assert f["ceiling"] == pytest.approx(a["ceiling"], rel=1e-9)
        tables = fit_tables(job_f, outcomes_f)
        assert tables["components"].height == 10  # every effect of the facet design


def _assert_close(a: object, b: object, path: str = "") -> None:
    """Equal JSON-ready data, floats to 1e-12 relative (sums may add in another order)."""
    if isinstance(a, dict):
        assert isinstance(b, dict), path
        assert a.keys() == b.keys(), path
        for k in a:
            _assert_close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple), path
        assert len(a) == len(b), path
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_close(x, y, f"{path}[{k}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-12, nan_ok=True), path
    else:
        assert a == b, path


Columns = list[tuple[str, pl.DataType | None]]
# docs/results.md's type names.
DOC_TYPES = {"str": pl.String, "f64": pl.Float64, "i64": pl.Int64, "bool": pl.Boolean, "list": pl.List(pl.String)}


def _doc_columns(cell: str) -> Columns:
    """Columns of one cell of docs/results.md's table list, in order, with their documented types.

    A cell is backticked names and parentheses, as in ``a (str, e.g. x), b, c (f64)``
    (names in backticks). A parenthesis whose first word is a type gives that type
    to the names since the previous parenthesis (``b`` and ``c`` here); names
    inside a parenthesis are examples, not columns; names no parenthesis follows
    have no documented type (``None``).
    """
    columns: Columns = []
    pending: list[str] = []
    depth, k = 0, 0
    while k < len(cell):
        char = cell[k]
        if char == "(":
            if depth == 0:
                word = re.match(r"\(\s*(\w+)", cell[k:])
                kind = DOC_TYPES[word.group(1)] if word and word.group(1) in DOC_TYPES else None
                assert kind is not None, f"unknown type in {cell[k:k + 30]!r}"
                columns += [(name, kind) for name in pending]
                pending = []
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "`":
            end = cell.index("`", k + 1)
            if depth == 0:
                pending.append(cell[k + 1 : end])
            k = end
        k += 1
    return columns + [(name, None) for name in pending]


def _documented_schemas() -> tuple[Columns, dict[str, Columns]]:
    """The fit's naming columns and every table's further columns, as docs/results.md writes them."""
    text = (ROOT / "docs/results.md").read_text()
    lead = re.search(r"Every table starts with the three columns that name the fit:\s*(.*?)\.\s", text, re.S)
    assert lead is not None
    tables = {}
    for line in text.splitlines():
        row = re.match(r"^\| `(\w+)` \| (.*?) \| .* \|$", line)
        if row:
            tables[row.group(1)] = _doc_columns(row.group(2))
    return _doc_columns(lead.group(1)), tables


def test_the_documented_schemas_are_read_as_written() -> None:
    # The reader of docs/results.md on cells of its three kinds.
    assert _doc_columns("`quantity` (str: `erho2`, `phi`), `estimate`, `low` (f64; `inf` = never)") == [
        ("quantity", pl.String), ("estimate", pl.Float64), ("low", pl.Float64)]
    assert _doc_columns("`rank` (i64, 1 = best), `ok` (bool: kept)") == [("rank", pl.Int64), ("ok", pl.Boolean)]
    assert _doc_columns("`system_id`, `p_value`") == [("system_id", None), ("p_value", None)]
    lead, tables = _documented_schemas()
    assert lead == [("item_set", pl.String), ("universe", pl.String), ("population", pl.String)]
    assert len(tables) == 29  # gstudy 9 (judge_effects), cyclic 3, pairwise 8, sequential 7, latent 2
    assert tables["components"][:2] == [("component", pl.String), ("estimate", pl.Float64)]


def test_tables_have_the_documented_schemas(fitted, small_store: Store) -> None:
    """The tables fits write against docs/results.md: names and order everywhere, types where documented."""
    _, result = fitted
    pairwise_job = next(j for j in plan_fits(small_store, _config(small_store)).jobs if j.protocol == "pairwise")
    pairwise = fit_and_tabulate(pairwise_job, figures=False)
    assert pairwise.error is None, pairwise.trace
    written = {**result.tables, **pairwise.tables}  # a pointwise and a pairwise fit: every table
    lead, documented = _documented_schemas()
    # An opt-in analysis (the latent G-study) writes its tables only when asked: its own tests read them.
    asked = {t.name for a in registered() if not a.by_default for t in a.tables}
    assert set(written) == set(documented) - asked
    for table, columns in documented.items():
        if table in asked:
            continue
        frame = written[table]
        want = lead + columns
        assert frame.columns == [name for name, _ in want], table
        for name, kind in want:
            if kind is not None:
                assert frame.schema[name] == kind, (table, name, frame.schema[name], kind)
        # CyclicJudge needs a crossed panel with generations, the pairwise G-study a common baseline,
        # the sequential group contrast two groups named in the configuration.
        if table not in ("cyclic_systems", "cyclic_strategies", "judge_offsets", "pairwise_gstudy",
                         "sequential_groups"):
            assert frame.height > 0, table
    # The run folder's listing names the same tables.
    listed = re.findall(r"^\s+(\w+)\.parquet", (ROOT / "docs/results.md").read_text(), re.M)
    assert set(listed) == set(documented)


def _erho2_by_hand(c: dict[str, float], n_i: float, n_j: float) -> float:
    """E rho^2 of ``s x i x j x r:sij`` at one run, written out (paper section 5).

    The convention of docs/gstudy.md ("Boundaries"): the raw components, negative
    or not, are summed into sigma2_delta, and the ratio truncates its two
    variances, ``max(s, 0) / (max(s, 0) + max(delta, 0))``.
    """
    relative_error = (
        c["sigma2_si"] / n_i + c["sigma2_sj"] / n_j + (c["sigma2_sij"] + c["sigma2_r_sij"]) / (n_i * n_j)
    )
    tau = max(c["sigma2_s"], 0.0)
    return tau / (tau + max(relative_error, 0.0))


def _truncated(c: dict[str, float]) -> dict[str, float]:
    return {k: max(v, 0.0) for k, v in c.items()}


def test_erho2_curve_matches_the_crossed_design_formula(fitted) -> None:
    from jurymeter.analyses.gstudy import GSTUDY, GStudyResult
    from jurymeter.stats.curves import curves

    _, result = fitted
    c = {r["component"]: r["estimate"] for r in result.tables["components"].iter_rows(named=True)}
    assert set(c) == {"sigma2_s", "sigma2_i", "sigma2_j", "sigma2_si", "sigma2_sj", "sigma2_ij",
                      "sigma2_sij", "sigma2_r_sij"}
    for row in result.tables["erho2_curve"].sample(25, seed=1).iter_rows(named=True):
        assert row["erho2"] == pytest.approx(_erho2_by_hand(c, row["items"], row["judges"]), rel=1e-9)
    ceilings = dict(result.tables["ceilings"].select("judges", "ceiling").iter_rows())
    last = result.tables["erho2_curve"].filter(pl.col("items") == pl.col("items").max())
    for judges, at_500 in last.select("judges", "erho2").iter_rows():
        assert at_500 <= ceilings[judges] + 1e-12
        assert at_500 == pytest.approx(ceilings[judges], abs=0.02)

    # The fit above estimates every component positive, where truncating or not is
    # the same. A fit whose sigma2_sij and sigma2_sj estimate negative (as small
    # interactions do): its tables must follow the raw values, and a truncating
    # formula would miss every row by more than the tolerance.
    report = copy.deepcopy(result.report["analyses"]["gstudy"])
    report["components"]["sigma2_sij"]["raw"] = -0.10
    report["components"]["sigma2_sj"]["raw"] = -0.01
    raw = {name: v["raw"] for name, v in report["components"].items()}
    assert raw["sigma2_sij"] + raw["sigma2_r_sij"] > 0  # a valid error variance, as estimated
    report.update(curves(report))
    rows = GSTUDY.tabulate(GStudyResult(design=report["design"], systems=0, items=0, judges=0,
                                        erho2=None, ceiling=None, mdd95=None, report=report))
    tables = {name: pl.DataFrame(rows[name]) for name in ("erho2_curve", "ceilings")}
    curve = tables["erho2_curve"]
    assert curve.height == len(result.tables["erho2_curve"])
    for row in curve.iter_rows(named=True):
        n_i, n_j = row["items"], row["judges"]
        assert row["erho2"] == pytest.approx(_erho2_by_hand(raw, n_i, n_j), rel=1e-9)
        assert abs(row["erho2"] - _erho2_by_hand(_truncated(raw), n_i, n_j)) > 1e-4
    for judges, value in tables["ceilings"].select("judges", "ceiling").iter_rows():
        # Eq. 4 with its error variance sigma2_sj / n_j truncated at zero: raw, it would be above 1.
        assert raw["sigma2_s"] / (raw["sigma2_s"] + raw["sigma2_sj"] / judges) > 1.0
        assert value == 1.0


def test_budget_rows_respect_the_budget_and_mark_the_best_split(fitted) -> None:
    _, result = fitted
    budget = result.tables["budget"]
    assert (budget["items"] * budget["judges"] <= budget["budget"]).all()
    for _, rows in budget.group_by("budget"):
        assert rows["optimal"].sum() == 1
        assert rows.filter(pl.col("optimal"))["mdd95"].item() == pytest.approx(rows["mdd95"].min())


def test_leaderboard_means_and_groups(fitted, small_store: Store) -> None:
    _, result = fitted
    board = result.tables["leaderboard"]
    # The simulated panel is complete, so the block's means are the plain means.
    assert result.report["analyses"]["gstudy"]["block"]["completeness"] == 1.0
    means = small_store.scan("pointwise", "sim-chat").group_by("system_id").agg(pl.col("score").mean()).collect()
    expected = dict(means.iter_rows())
    assert dict(board.select("system_id", "mean").iter_rows()) == pytest.approx(expected)
    assert board["rank"].to_list() == list(range(1, board.height + 1))
    assert board["mdd95"].unique().item() == pytest.approx(result.report["analyses"]["gstudy"]["mdd95"])


def test_a_universe_or_population_naming_an_unknown_id_is_one_clear_error(small_store: Store) -> None:
    config = _config(small_store)
    from dataclasses import replace

    typo = replace(config, universes={"three": ("judge-a", "judge-bb", "judge-c")})
    with pytest.raises(ConfigError, match=r"universe 'three' names judge id\(s\) 'judge-bb'.*known: judge-a"):
        plan_fits(small_store, typo)
    ghosts = replace(config, populations={"ghosts": ("nobody",)},
                     fit=replace(config.fit, populations=("ghosts",)))
    with pytest.raises(ConfigError, match=r"population 'ghosts' names system id\(s\) 'nobody'"):
        plan_fits(small_store, ghosts)


def test_item_sets_no_analysis_can_fit_are_named_with_the_reason(small_store: Store) -> None:
    plan = plan_fits(small_store, _config(small_store, analyses=["gstudy", "cyclic"]))
    assert [(s.item_set, s.protocol) for s in plan.skipped] == [("sim-chat", "pairwise")]
    assert "gstudy fits pointwise item sets, not pairwise" in plan.skipped[0].reason


def test_a_fit_that_cannot_run_comes_back_as_one_line(small_store: Store) -> None:
    from dataclasses import replace

    job = plan_fits(small_store, _config(small_store)).jobs[0]
    job = replace(job, settings=replace(job.settings, systems=("nobody", "none")))
    result = fit_and_tabulate(job)
    assert result.report is None
    assert result.tables is None
    assert "\n" not in result.error
    assert len(result.error) <= 1000
    assert "Traceback" in result.trace


def test_a_long_error_is_cut_to_one_line_and_says_so() -> None:
    from jurymeter.pipeline.fit import ONE_LINE_MAX, one_line

    assert one_line(ValueError("short\nsecond line")) == "ValueError: short"
    long = one_line(ValueError("x" * 5000))
    assert len(long) == ONE_LINE_MAX
    assert long.endswith("\u2026")
    exact = "y" * (ONE_LINE_MAX - len("ValueError: "))
    assert one_line(ValueError(exact)) == f"ValueError: {exact}"  # at the limit: not cut


def test_cache_round_trip_keeps_inf_and_schemas(fitted, small_store: Store) -> None:
    from dataclasses import replace

    job, result = fitted
    assert read_cached(small_store, job, figures=True) is None
    tables = {**result.tables}
    dstudy = tables["dstudy"].with_columns(
        pl.when(pl.col("quantity") == "items_needed").then(math.inf).otherwise(pl.col("estimate")).alias("estimate")
    )
    tables["dstudy"] = dstudy
    write_cached(small_store, job, replace(result, tables=tables))
    back = read_cached(small_store, job, figures=True)
    assert back is not None
    assert back.status == "reused"
    assert back.figures == result.figures
    assert read_cached(small_store, job, figures=False).figures is None  # type: ignore[union-attr]
    # A reused fit carries the summary and report of the fitted one.
    assert back.summary == result.summary
    assert back.report == orjson.loads(orjson.dumps(result.report, option=orjson.OPT_SERIALIZE_NUMPY))
    # What a run reuses holds neither: the report stays in its file, the figures are read as looked up
    # (a run holding them all grew the main process by ~3 MB per reused fit, issue 25).
    light = read_cached(small_store, job, figures=True, hold=False)
    assert light is not None
    assert light.report is None
    assert light.report_file is not None
    assert light.tables is not None
    assert set(light.tables) == set(tables)
    assert all(light.tables[name].equals(frame) for name, frame in tables.items())
    assert orjson.loads(small_store.fs.cat_file(small_store.path(light.report_file))) == back.report
    assert light.figures == result.figures
    name = next(iter(result.figures))
    small_store.fs.rm(small_store.path(f"{light.report_file.rsplit('/', 1)[0]}/figures/{name}"))
    with pytest.raises(FileNotFoundError):
        light.figures[name]  # type: ignore[index]
    assert set(back.tables) == set(tables)  # type: ignore[arg-type]
    for name, frame in tables.items():
        assert back.tables[name].equals(frame), name  # type: ignore[index]
    assert np.isinf(back.tables["dstudy"].filter(pl.col("quantity") == "items_needed")["estimate"].item())  # type: ignore[index]


def test_a_worker_draws_the_fits_report_figures_only_when_asked(fitted, small_store: Store) -> None:
    from jurymeter.render.html import figure_file_name

    job, result = fitted
    fit = (job.item_set, job.universe, job.population)
    kinds = {"erho2", "nomogram", "budget", "rank-intervals", "judge-effects", "strategies", "judge-offsets",
             "serial-dependence"}
    assert set(result.figures) == {figure_file_name(fit, kind) for kind in kinds}
    assert all(png.startswith(b"\x89PNG") for png in result.figures.values())
    assert fit_and_tabulate(job).figures is None


# ------------------------------------------------------------------ the flow, for real


def _landing(root: Path, *, item_sets: tuple[str, ...] = ("sim-chat",), seed: int = 0) -> Path:
    params = SimulationParams(n_systems=6, n_items=24, n_judges=4, pairwise_pairs=6, seed=seed)
    paths = write_dump(simulate_dump(params), root / "landing")
    pointwise = pl.read_ndjson(paths["pointwise"])
    for name in item_sets[1:]:
        pointwise.with_columns(pl.lit(name).alias("item_set")).write_ndjson(root / "landing" / f"{name}.jsonl")
    return root / "landing"


def _run(tmp_path: Path, api: str, config: str, *flags: str, ok: bool = True, **env: str) -> dict:
    path = tmp_path / "jm.toml"
    path.write_text(config)
    result = subprocess.run(
        [sys.executable, "-m", "jurymeter.cli", "run", "--config", str(path), *flags],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env=venv_env(PREFECT_API_URL=api, PREFECT_HOME=str(tmp_path / "prefect-client"), **env),
    )
    assert (result.returncode == 0) == ok, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    run_id = re.search(r"run (\d{8}T\d{6}Z-[0-9a-f]{8})", result.stdout).group(1)  # type: ignore[union-attr]
    store = Store(re.search(r'store = "([^"]+)"', config).group(1))  # type: ignore[union-attr]
    summary = orjson.loads(store.fs.cat_file(store.path(f"results/{run_id}/summary.json")))
    summary["_stdout"], summary["_stderr"] = result.stdout, result.stderr
    return summary


def _printed_rows(stdout: str) -> list[list[str]]:
    """The cells of every row of the fits' tables ``jurymeter run`` prints (a failed fit's error
    wraps onto more lines: those, with no item set, are left out)."""
    rows = [line.split("\u2502")[1:-1] for line in stdout.splitlines() if line.startswith("\u2502")]
    return [[cell.strip() for cell in row] for row in rows if row[0].strip()]


def _statuses(summary: dict, protocol: str = "pointwise") -> dict[tuple[str, str, str], str]:
    """Status of each fit of one protocol (the simulated item sets are pointwise and pairwise under one name)."""
    return {(f["item_set"], f["universe"], f["population"]): f["status"] for f in summary["fits"]
            if f["protocol"] == protocol}


LOCAL_CONFIG = """\
store = "{root}/store"
landing = "{root}/landing"
home = "{root}/.jurymeter"
scale = [1, 10]
[universes]
three = ["judge-a", "judge-b", "judge-c"]
[populations]
# One system: its G-study is skipped with its reason (no system variance to estimate), the
# other analyses fit; _failing_solo() makes these fits fail as a bug would, for failure isolation.
solo = ["sys-01"]
[fit]
universes = ["all", "three"]
populations = ["all", "solo"]
n_boot = 12  # FEW_DRAWS
[fit.sequential]
n_boot = 2  # SEQUENTIAL_DRAWS
[dask]
# One worker process to start and preload (3-4 CPU-s each run); the demo's LocalCluster
# (tests/test_demo.py) and the multi-process cluster below run two.
workers = 1
"""


def _failing_solo(tmp_path: Path) -> dict[str, str]:
    """The environment of a run whose pointwise fits of population ``solo`` raise, in every process (workers too).

    No data fails a fit by design any more (what cannot be estimated is null with its reason), so
    the failure a bug or a lost resource would cause is injected by a ``sitecustomize`` module the
    run's process and its Dask workers import at start.
    """
    inject = tmp_path / "inject"
    inject.mkdir(exist_ok=True)
    (inject / "sitecustomize.py").write_text(
        "import jurymeter.pipeline.fit as fit\n"
        "real = fit.run_fit\n"
        "def run_fit(job, **kwargs):\n"
        "    if job.population == 'solo' and job.protocol == 'pointwise':\n"
        "        raise RuntimeError('injected failure of a solo fit')\n"
        "    return real(job, **kwargs)\n"
        "fit.run_fit = run_fit\n"
    )
    return {"PYTHONPATH": os.pathsep.join([str(inject), *filter(None, [os.environ.get("PYTHONPATH")])])}


@pytest.mark.slow
def test_flow_on_a_local_cluster_fits_reuses_isolates_failures_and_refits(
    tmp_path: Path, prefect_server: str
) -> None:
    _landing(tmp_path, item_sets=("sim-chat", "sim-code"))
    config = LOCAL_CONFIG.format(root=tmp_path)
    failing = _failing_solo(tmp_path)
    first = _run(tmp_path, prefect_server, config, ok=False, **failing)  # the solo fits fail
    statuses = _statuses(first)
    assert len(statuses) == 8
    failed = {k for k, v in statuses.items() if v == "failed"}
    assert failed == {(s, u, "solo") for s in ("sim-chat", "sim-code") for u in ("all", "three")}
    assert all(v == "fitted" for k, v in statuses.items() if k not in failed)
    pairwise = _statuses(first, "pairwise")
    assert pairwise, first["fits"]
    assert set(pairwise.values()) == {"fitted"}, pairwise
    assert first["status"] == "partial"
    assert first["ingest"]["totals"]["read"] > 0
    assert first["_stderr"].count("fit failed:") == 4
    store = Store(str(tmp_path / "store"))
    folder = f"results/{first['run_id']}"
    board = store.read_parquet(store.path(f"{folder}/leaderboard.parquet"))
    assert board.select("item_set", "universe").unique().height == 4  # failed fits hold no rows
    assert store.fs.exists(store.path(f"{folder}/report/index.html"))

    # Piped output arrives in order: the ingest line before the fits' table.
    out = first["_stdout"]
    assert out.index("ingest: read") < out.index(f"run {first['run_id']}")
    assert re.search(r"timings ingest_wait \d+\.\d s, ingest \d+\.\d s", out), out

    # New judgments of one item set (its fits refitted), the other's unchanged (its fits reused), in
    # one rerun.
    extra = pl.read_ndjson(tmp_path / "landing" / "sim-code.jsonl").with_columns(pl.col("replicate") + 10)
    extra.write_ndjson(tmp_path / "landing" / "sim-code-more.jsonl")
    second = _run(tmp_path, prefect_server, config, ok=False, **failing)
    # The landing's first files were already ingested: only the new one's records are.
    assert second["ingest"]["totals"]["accepted"] == extra.height
    assert {Path(s["source"]).name: s["status"] for s in second["ingest"]["sources"]
            if s["status"] != "already_ingested"}.keys() == {"sim-code-more.jsonl"}
    # A reused fit carries the summary of the fitted one: headline numbers, not dashes.
    firsts = {(f["protocol"], f["item_set"], f["universe"], f["population"]): f for f in first["fits"]}
    for fit in second["fits"]:
        if fit["status"] == "reused":
            before = firsts[(fit["protocol"], fit["item_set"], fit["universe"], fit["population"])]
            assert fit["analyses"] == before["analyses"]
            if fit["protocol"] == "pointwise":
                assert isinstance(fit["analyses"]["gstudy"]["erho2"], float)
            elif fit["analyses"]["pairwise"]["status"] == "fitted":  # skipped where the population has no pair
                assert isinstance(fit["analyses"]["pairwise"]["slot_a_advantage"], float)
    assert {k: v for k, v in _statuses(second).items() if k not in failed} == {
        ("sim-chat", "all", "all"): "reused", ("sim-chat", "three", "all"): "reused",
        ("sim-code", "all", "all"): "fitted", ("sim-code", "three", "all"): "fitted",
    }
    assert set(_statuses(second, "pairwise").values()) == {"reused"}  # the pairwise item set is sim-chat's
    # What the rerun prints: each reused fit's row as the first run printed it, numbers and all, and
    # a progress line saying it was reused.
    printed, reprinted = _printed_rows(first["_stdout"]), _printed_rows(second["_stdout"])
    assert len(printed) == len(reprinted) == len(first["fits"])  # two tables: pointwise fits, then pairwise
    kept = [k for k, row in enumerate(reprinted) if row[3] != "fitted"]  # all but sim-code's refits
    assert len(kept) == len(printed) - 2
    assert [reprinted[k][:3] + reprinted[k][4:] for k in kept] == [printed[k][:3] + printed[k][4:] for k in kept]
    assert [reprinted[k][3] for k in kept] == [{"fitted": "reused"}.get(printed[k][3], printed[k][3]) for k in kept]
    assert all(cell not in ("-", "n/a") for k in kept if reprinted[k][2] == "all" for cell in reprinted[k][4:])
    progress = second["_stdout"].splitlines()
    for fit in second["fits"]:
        label = f"{fit['protocol']} {fit['item_set']} / {fit['universe']} / {fit['population']}"
        said = [line for line in progress if "] fit reused, inputs unchanged" in line and line.endswith(label)]
        assert len(said) == (fit["status"] == "reused"), (label, fit["status"])
    # A reused fit is published as it was fitted: its report file byte for byte (copied from the cache, not
    # held), its page but for the run's name and the fit's status line (reused, 0 s).
    second_folder = f"results/{second['run_id']}"
    for fit in second["fits"]:
        if fit["status"] == "reused":
            for run_folder in (folder, second_folder):
                assert store.fs.exists(store.path(f"{run_folder}/fits/{fit['key']}.json")), (run_folder, fit["key"])
            assert (store.fs.cat_file(store.path(f"{second_folder}/fits/{fit['key']}.json"))
                    == store.fs.cat_file(store.path(f"{folder}/fits/{fit['key']}.json")))
    pages = sorted(Path(store.path(f"{folder}/report/fits")).glob("*.html"))
    compared = 0
    for page in pages:
        if "sim-chat" in page.name:
            compared += 1
            def lines(text: str) -> list[str]:
                return [line for line in text.splitlines() if 'class="status-' not in line]

            again = Path(store.path(f"{second_folder}/report/fits/{page.name}")).read_text()
            assert lines(again) == lines(page.read_text().replace(first["run_id"], second["run_id"])), page.name
    assert compared >= 2  # sim-chat's pointwise fits in two universes, and its pairwise ones
    unchanged = pl.col("item_set") == "sim-chat"
    reused = store.read_parquet(store.path(f"results/{second['run_id']}/components.parquet")).filter(unchanged)
    original = store.read_parquet(store.path(f"{folder}/components.parquet")).filter(unchanged)
    assert reused.height > 0
    assert reused.sort(reused.columns).equals(original.sort(original.columns))

    # --force refits fits whose inputs are unchanged: sim-chat's, reused by the second run. One item set
    # is enough to show it (a fit's key does not hold [fit] item_sets) and halves the run.
    scoped = config.replace("[fit]\n", '[fit]\nitem_sets = ["sim-chat"]\n', 1)
    forced = _run(tmp_path, prefect_server, scoped, "--force", ok=False, **failing)
    refitted = {k: v for k, v in _statuses(forced).items() if k not in failed}
    assert {k[0] for k in refitted} == {"sim-chat"}
    assert set(refitted.values()) == {"fitted"}
    assert set(_statuses(forced, "pairwise").values()) == {"fitted"}

    # The report is rebuilt from the run folder alone (the command in this process: a subprocess's
    # start and imports were 2-3 s each).
    from typer.testing import CliRunner

    from jurymeter.cli.app import app

    page = Path(store.path(f"results/{forced['run_id']}/report/index.html"))
    page.unlink()
    rebuilt = CliRunner().invoke(app, ["report", "latest", "--store", store.url])
    assert rebuilt.exit_code == 0, rebuilt.output
    assert f"report: {page}" in rebuilt.stdout
    assert page.stat().st_size > 10_000
    missing = CliRunner().invoke(app, ["report", "no-such-run", "--store", store.url])
    assert missing.exit_code == 1
    assert missing.stderr.count("\n") == 1
    assert "not a complete run folder" in missing.stderr


def test_an_ingest_begun_before_the_flow_is_what_the_ingest_task_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    import jurymeter.orchestration.flow as flow
    from jurymeter.pipeline.config import DaskConfig

    _landing(tmp_path)
    config = load_config(None, environ={}, overrides={
        "store": str(tmp_path / "store"), "landing": str(tmp_path / "landing"), "scale": [1, 10]})
    threads: list[str] = []
    real = flow._ingest

    def recorded(cfg: RunConfig) -> dict | None:
        threads.append(threading.current_thread().name)
        if len(threads) == 3:
            raise OSError("transient: disk busy")
        return real(cfg)

    monkeypatch.setattr(flow, "_ingest", recorded)
    flow.start_ingest_early(config)
    assert len(flow._early_ingests) == 1
    # The flow's configuration names the scheduler the CLI started meanwhile: still the same ingest.
    claimed = flow.ingest_landing.fn(replace(config, dask=DaskConfig(address="tcp://127.0.0.1:8786")))
    assert threads == ["jurymeter-early-ingest"]  # taken, not run again
    assert claimed is not None
    assert claimed["totals"]["read"] == claimed["totals"]["accepted"] > 0
    assert not flow._early_ingests  # taken once
    again = flow.ingest_landing.fn(config)  # no early ingest left: this one runs, and finds nothing new
    assert threads[1] == threading.current_thread().name
    assert again is not None
    assert [s["status"] for s in again["sources"]] == ["already_ingested"] * len(again["sources"])

    # An early ingest that failed: the attempt that takes it fails the same way,
    # and the retry Prefect then makes ingests for itself.
    flow.start_ingest_early(config)
    with pytest.raises(OSError, match="disk busy"):
        flow.ingest_landing.fn(config)
    assert threads[2] == "jurymeter-early-ingest"
    assert flow.ingest_landing.fn(config) is not None
    assert len(threads) == 4


RETRY_SCRIPT = """\
import sys
import jurymeter.orchestration.flow as flow

calls = []
original = flow.publish_run

def flaky(*args, **kwargs):
    calls.append(1)
    if len(calls) == 1:
        raise OSError("transient: connection reset while writing")
    return original(*args, **kwargs)

flow.publish_run = flaky
if __name__ == "__main__":
    summary = flow.nightly(sys.argv[1])
    print("calls", len(calls), "status", summary["status"])
"""


@pytest.mark.slow
def test_a_transient_io_error_is_retried(tmp_path: Path, prefect_server: str) -> None:
    _landing(tmp_path)
    # One G-study fit: the retry is the publishing's, whatever was fitted.
    config = (LOCAL_CONFIG.format(root=tmp_path).replace('populations = ["all", "solo"]', 'analyses = ["gstudy"]')
              .replace('universes = ["all", "three"]', 'universes = ["all"]'))
    (tmp_path / "jm.toml").write_text(config)
    (tmp_path / "retry.py").write_text(RETRY_SCRIPT)
    result = subprocess.run(
        [sys.executable, str(tmp_path / "retry.py"), str(tmp_path / "jm.toml")],
        capture_output=True, text=True, timeout=600, cwd=ROOT,
        env=venv_env(PREFECT_API_URL=prefect_server, PREFECT_HOME=str(tmp_path / "ph"),
                      PYTHONPATH=str(ROOT)),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "calls 2 status complete" in result.stdout


@pytest.mark.slow
def test_flow_on_a_multi_process_cluster_whose_workers_never_import_prefect(
    tmp_path: Path, prefect_server: str
) -> None:
    from distributed import Client

    _landing(tmp_path)
    port = free_port()
    cluster, address = start_ready(
        ["bash", str(ROOT / "infra/scripts/dask-cluster.sh"), str(port), "2"],
        "DASK_SCHEDULER_ADDRESS=", venv_env(), tmp_path,
    )
    try:
        config = LOCAL_CONFIG.format(root=tmp_path).replace('populations = ["all", "solo"]', "")
        summary = _run(tmp_path, prefect_server, config, "--scheduler", address)
        assert set(_statuses(summary).values()) == {"fitted"}
        with Client(address, timeout=30) as client:
            info = client.scheduler_info()["workers"]
            assert len(info) == 2
            assert all(pid != os.getpid() for pid in client.run(os.getpid).values())
            assert set(client.run(lambda: "prefect" in sys.modules).values()) == {False}
            assert set(client.run(lambda: "jurymeter.stats.reliability" in sys.modules).values()) == {True}
            # The script keeps glibc's mmap threshold fixed (src/jurymeter/orchestration/runtime.py, WORKER_MALLOC).
            thresholds = client.run(lambda: os.environ.get("MALLOC_MMAP_THRESHOLD_"))
            assert set(thresholds.values()) == {"67108864"}
    finally:
        stop_group(cluster)


@pytest.mark.slow
@pytest.mark.s3
def test_flow_against_an_s3_store_and_landing(tmp_path: Path, prefect_server: str, moto_s3) -> None:
    landing = _landing(tmp_path)
    for path in landing.iterdir():
        moto_s3.client.upload_file(str(path), moto_s3.bucket, f"landing/{path.name}")
    config = (
        f'store = "s3://{moto_s3.bucket}/store"\nlanding = "s3://{moto_s3.bucket}/landing"\n'
        f'home = "{tmp_path}/.jurymeter"\nscale = [1, 10]\n[fit]\nn_boot = {FEW_DRAWS}\n{SEQUENTIAL_DRAWS}'
        "[dask]\nworkers = 1\n"  # one worker process to start: what is checked is the store's, not the cluster's
    )
    summary = _run(tmp_path, prefect_server, config)
    assert set(_statuses(summary).values()) == {"fitted"}
    assert summary["ingest"]["totals"]["read"] == summary["ingest"]["totals"]["accepted"] + summary["ingest"]["totals"]["quarantined"]
    keys = {o["Key"] for o in moto_s3.client.list_objects_v2(Bucket=moto_s3.bucket, Prefix="store/results/")["Contents"]}
    folder = f"store/results/{summary['run_id']}"
    assert {f"{folder}/summary.json", f"{folder}/report/index.html", f"{folder}/leaderboard.parquet"} <= keys
    assert "testing" not in summary["_stdout"] + summary["_stderr"]  # the secret key


@pytest.mark.slow
def test_local_cluster_workers_keep_a_fixed_mmap_threshold() -> None:
    # A plain LocalCluster first: its nanny leaves MALLOC_TRIM_THRESHOLD_=65536 in this
    # process's environment, which later nannies would otherwise prefer to any config.
    import dask
    from distributed import Client, LocalCluster

    from jurymeter.orchestration.runtime import LOCAL_CLUSTER_CONFIG, WORKER_MALLOC, run_cluster

    with LocalCluster(n_workers=1, processes=True, dashboard_address=None):
        pass
    with run_cluster(None, 1, 1) as address, Client(address, set_as_default=False) as client:
        seen = client.run(lambda: {k: os.environ.get(k) for k in WORKER_MALLOC})
        # The preload: a worker has the fits' modules before its first fit.
        preloaded = client.run(lambda: [m for m in fit_modules() if m in sys.modules])
        settings = client.run(lambda: {k: dask.config.get(k) for k in LOCAL_CLUSTER_CONFIG})
        filters = client.run(lambda: [type(f).__name__ for f in logging.getLogger("distributed.worker").filters])
    assert list(seen.values()) == [{k: str(v) for k, v in WORKER_MALLOC.items()}]
    assert list(preloaded.values()) == [list(fit_modules())]
    assert list(settings.values()) == [LOCAL_CLUSTER_CONFIG]  # the quiet batch settings reached the worker
    assert list(filters.values()) == [["ClosingWorkerHeartbeatFilter"]]  # dask_setup ran in the worker


def test_a_closing_worker_drops_only_its_own_heartbeat_failure(caplog: pytest.LogCaptureFixture) -> None:
    from types import SimpleNamespace

    from distributed.core import Status

    from jurymeter.orchestration.worker_preload import dask_setup

    worker = SimpleNamespace(status=Status.running)
    logger = logging.getLogger("distributed.worker")
    before = list(logger.filters)
    dask_setup(worker)
    try:
        def heartbeat_fails() -> None:
            try:
                raise OSError("ConnectionPool closing.")
            except OSError:
                logger.exception("Failed to communicate with scheduler during heartbeat.")

        with caplog.at_level(logging.INFO, logger="distributed.worker"):
            heartbeat_fails()  # a running worker: a real failure, kept with its traceback
            worker.status = Status.closing
            heartbeat_fails()  # the worker closed its own pool under the heartbeat: dropped
            logger.error("Worker stream died during communication")  # anything else: kept
            worker.status = Status.closed
            heartbeat_fails()
        kept = [(r.getMessage(), r.exc_info is not None) for r in caplog.records if r.name == "distributed.worker"]
    finally:
        logger.filters[:] = before
    assert kept == [
        ("Failed to communicate with scheduler during heartbeat.", True),
        ("Worker stream died during communication", False),
    ]


@pytest.mark.slow
def test_a_retired_local_cluster_closes_in_the_background_and_the_run_exits_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from distributed import Client

    from jurymeter.orchestration.runtime import retire_cluster, run_environment

    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")  # an external API: no server starts
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path / "prefect"))
    with run_environment(str(tmp_path), None, 1, 1) as address:
        with Client(address, set_as_default=False) as client:
            assert client.submit(sum, [1, 2]).result() == 3
        retire_cluster("tcp://127.0.0.1:1")  # not a cluster of this run: nothing happens
        assert not _closing()
        retire_cluster(address)
        assert _closing()
    assert not _closing()  # the run's exit waited for the close
    with pytest.raises(OSError, match="connect"):
        Client(address, timeout=2, set_as_default=False)


def _closing() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "jurymeter-cluster-close"]


def test_the_example_config_holds_exactly_the_defaults() -> None:
    assert load_config(ROOT / "jurymeter.toml", environ={}) == RunConfig()


def test_printing_a_run_with_no_fits_says_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    from jurymeter.cli.run import print_run_summary

    print_run_summary(
        {"run_id": "r", "status": "complete", "store": "s", "landing": "in", "ingest": None,
         "fits": [], "timings": {"ingest": 0.1}}
    )
    text = capsys.readouterr().out
    assert "no fits" in text
    assert "drop judgment dumps into in" in text


def test_progress_says_each_fit_sent_and_back_and_breaks_every_silence(
    small_store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's progress lines (issue 24, point 8), on a clock the test moves: a start and an end
    line per fit, reused fits said once, and a "still ..." line once nothing was said for 5 s."""
    from jurymeter.cli.run import QUIET_SECONDS, RunProgress
    from jurymeter.pipeline.cache import FitOutcome

    jobs = plan_fits(small_store, load_config(None, overrides={"store": small_store.url}, environ={})).jobs[:2]
    now = [100.0]
    progress = RunProgress("starting", clock=lambda: now[0])  # no thread: not entered
    assert progress.quiet_line() is None
    now[0] += QUIET_SECONDS
    assert progress.quiet_line() == "still starting"
    progress.fit_started(jobs[0], 3)
    progress.fit_done(FitOutcome(jobs[1], "reused", None, None, None, None, 0.0))
    now[0] += 2 * QUIET_SECONDS
    assert progress.quiet_line() == f"still fitting (1 of 3 fits done; running {jobs[0].protocol} {jobs[0].name} (10 s))"
    spent = {"gstudy": {"status": "fitted", "seconds": 1.04}, "sequential": {"status": "fitted", "seconds": 10.5}}
    progress.fit_done(FitOutcome(jobs[0], "fitted", None, None, spent, None, 12.25))
    progress.fit_started(jobs[1], 3)
    progress.fit_done(FitOutcome(jobs[1], "failed", None, None, None, "boom", 0.5))
    now[0] += QUIET_SECONDS
    assert progress.quiet_line() == "still publishing the results and the report (3 of 3 fits done; running none)"
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        f"[   5.0 s] fit started (1 sent of 3): {jobs[0].protocol} {jobs[0].name}",
        f"[   5.0 s] fit reused, inputs unchanged (1 done of 3): {jobs[1].protocol} {jobs[1].name}",
        f"[  15.0 s] fit fitted in 12.2 s (sequential 10.5 s, gstudy 1.0 s) (2 done of 3): {jobs[0].protocol} {jobs[0].name}",
        f"[  15.0 s] fit started (2 sent of 3): {jobs[1].protocol} {jobs[1].name}",
        f"[  15.0 s] fit failed in 0.5 s (3 done of 3): {jobs[1].protocol} {jobs[1].name}",
    ]


def test_progress_heartbeat_thread_prints_while_a_run_is_quiet(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import jurymeter.cli.run as cli_run

    monkeypatch.setattr(cli_run, "QUIET_SECONDS", 0.05)
    monkeypatch.setattr(cli_run, "HEARTBEAT_POLL", 0.01)
    beat = threading.Event()
    with cli_run.RunProgress("waiting") as progress:
        original = progress.say

        def say(line: str) -> None:
            original(line)
            beat.set()

        monkeypatch.setattr(progress, "say", say)
        assert beat.wait(10)
    assert "] still waiting" in capsys.readouterr().out


# ------------------------------------------------------------------ the temporary Prefect server


def _fake_uvicorn(monkeypatch: pytest.MonkeyPatch, exits: list[int]) -> list[int]:
    """Make TemporaryServer.launch start processes that exit with the given statuses in turn."""
    from jurymeter.orchestration.runtime import TemporaryServer

    launched: list[int] = []

    def launch(self: TemporaryServer) -> TemporaryServer:
        status = exits[len(launched)]
        launched.append(status)
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, "-c", f"raise SystemExit({status})"])
        return self

    monkeypatch.setattr(TemporaryServer, "launch", launch)
    return launched


def test_a_server_that_dies_is_one_clear_error_naming_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jurymeter.errors import OrchestrationError
    from jurymeter.orchestration.runtime import PORT_IN_USE, TemporaryServer

    launched = _fake_uvicorn(monkeypatch, [PORT_IN_USE, 7])
    server = TemporaryServer(tmp_path).launch()
    with pytest.raises(OrchestrationError, match=r"exited with status 7; see .*server\.log"):
        server.wait(timeout=30)
    assert launched == [PORT_IN_USE, 7]  # a taken port is retried once, on another port


def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path: Path) -> None:
    from jurymeter.errors import OrchestrationError
    from jurymeter.orchestration.runtime import TemporaryServer

    server = TemporaryServer(tmp_path)
    server.port = free_port()
    server.process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    process = server.process
    with pytest.raises(OrchestrationError, match="did not answer within 1 s"):
        server.wait(timeout=1)
    assert process.poll() is not None
    assert server.process is None
