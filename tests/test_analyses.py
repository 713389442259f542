"""The analysis seam: a contract every registered analysis meets, and a toy analysis found end to end.

In the manner of scikit-learn's common estimator checks: each check runs over
every analysis in the registry, so a new analysis is held to the same
contract without a line of test code of its own. The toy analysis (every part
of the seam in one class) proves that registering an analysis is all it takes
for planning, the fit cache, the summary, the tables and the report page to
carry it: no pipeline code names it.
Independent references: the toy's numbers against a plain polars group-by of
the store; the published files read back from disk.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
import pytest

from jurymeter.analyses import analysis as analysis_named
from jurymeter.analyses import registered, registered_temporarily
from jurymeter.analyses.base import (
    Analysis,
    FitPart,
    FitScope,
    Headline,
    ItemSet,
    SectionPart,
    SummaryPart,
    Table,
    TablesPart,
)
from jurymeter.errors import ConfigError, JurymeterError
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from jurymeter.pipeline.cache import read_cached, run_fits
from jurymeter.pipeline.config import load_config
from jurymeter.pipeline.fit import run_fit
from jurymeter.pipeline.jobs import plan_fits
from jurymeter.pipeline.page import render_report
from jurymeter.pipeline.publish import publish_run
from jurymeter.pipeline.tables import frame, schemas
from jurymeter.simulate import SimulationParams, simulate_dump, write_dump
from report_pages import report_text

ANALYSES = registered()
IDS = [a.name for a in ANALYSES]


def _store(root: Path, **params: Any) -> Store:
    paths = write_dump(simulate_dump(SimulationParams(**params)), root / "dump")
    store = Store(str(root / "store"))
    ingest(store, discover_sources([str(p) for n, p in paths.items() if n != "truth"]), ValidationOptions(scale=(1.0, 10.0)))
    return store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return _store(tmp_path_factory.mktemp("contract"), n_systems=6, n_items=24, n_judges=4, pairwise_pairs=6, seed=5)


def _config(store: Store, root: Path, extra: str = "") -> Any:
    path = root / "jm.toml"
    path.write_text(f'store = "{store.url}"\nlanding = ""\n[fit]\nn_boot = 40\n{extra}')
    return load_config(path, environ={})


def _job(store: Store, root: Path, name: str) -> Any:
    config = _config(store, root, f'analyses = ["{name}"]\n')
    return next(j for j in plan_fits(store, config).jobs if j.protocol in analysis_named(name).protocols)


# ------------------------------------------------------------------ the contract, per analysis


@pytest.mark.parametrize("analysis", ANALYSES, ids=IDS)
def test_declarations_are_complete_and_consistent(analysis: Analysis[Any, Any]) -> None:
    assert analysis.name.replace("_", "").isalnum()
    assert analysis.title.strip()
    assert analysis.protocols
    assert set(analysis.protocols) <= {"pointwise", "pairwise"}
    assert analysis.tables
    for table in analysis.tables:
        assert isinstance(table, Table)
        assert table.schema
        assert table.doc.strip()
        assert not set(table.schema) & {"item_set", "universe", "population"}, table.name
        assert all(isinstance(t, pl.DataType) or (isinstance(t, type) and issubclass(t, pl.DataType))
                   for t in table.schema.values()), table.name
    keys = [h.key for h in analysis.headline]
    assert len(keys) == len(set(keys))
    assert all(isinstance(h, Headline) and h.kind in ("number", "count", "text", "flag") for h in analysis.headline)
    options = analysis.default_options()
    assert dataclasses.is_dataclass(options)
    assert type(options).__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert analysis.applies(ItemSet(protocol=analysis.protocols[0], name="x")) is None
    other = {"pointwise", "pairwise"} - set(analysis.protocols)
    for protocol in other:
        assert analysis.applies(ItemSet(protocol=protocol, name="x"))  # a reason, not None


@pytest.mark.parametrize("analysis", ANALYSES, ids=IDS)
def test_it_is_composed_of_the_seams_parts(analysis: Analysis[Any, Any]) -> None:
    # Each reader of the registry reads one part (the fit, the tables, the summary, the page section).
    for part in (FitPart, TablesPart, SummaryPart, SectionPart):
        assert isinstance(analysis, part), part.__name__


def test_pipeline_tables_does_not_import_pipeline_fit() -> None:
    # The two once imported each other (tables read fit's AnalysisOutcome): the outcome is below both now.
    import ast

    import jurymeter.pipeline.tables as tables_module

    tree = ast.parse(Path(tables_module.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "jurymeter.pipeline.fit" not in imported
    assert "jurymeter.pipeline.outcome" in imported


def test_table_names_are_unique_across_the_registry() -> None:
    names = [t.name for a in ANALYSES for t in a.tables]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("analysis", ANALYSES, ids=IDS)
def test_a_fit_gives_a_frozen_typed_result_and_tables_summary_report_of_its_declarations(
    analysis: Analysis[Any, Any], store: Store, tmp_path: Path
) -> None:
    job = _job(store, tmp_path, analysis.name)
    outcome = run_fit(job)[analysis.name]
    assert outcome.status == "fitted", outcome.reason
    result = outcome.result
    assert dataclasses.is_dataclass(result)
    field = dataclasses.fields(result)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(result, field, None)
    # The report is JSON-ready.
    report = analysis.report(result)
    orjson.loads(orjson.dumps(report, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS))
    # Its rows fit its documented tables exactly.
    rows = analysis.tabulate(result)
    assert set(rows) <= {t.name for t in analysis.tables}
    for table in analysis.tables:
        built = frame(table.name, job.names, rows.get(table.name, []))
        assert built.columns == ["item_set", "universe", "population", *table.schema], table.name
        for row in rows.get(table.name, []):
            assert set(row) == set(table.schema), (table.name, sorted(row))
    assert any(rows.get(t.name) for t in analysis.tables), "a fitted analysis publishes some rows"
    # The summary says exactly the headline, JSON-ready; numbers are finite or null.
    summary = analysis.summarize(result)
    assert list(summary) == [h.key for h in analysis.headline]
    orjson.dumps(summary)
    for h in analysis.headline:
        value = summary[h.key]
        if h.kind == "number" and value is not None:
            assert isinstance(value, float), h.key
            assert math.isfinite(value), h.key
        if h.kind == "count" and value is not None:
            assert isinstance(value, int), h.key


@pytest.mark.parametrize("analysis", ANALYSES, ids=IDS)
def test_its_report_section_is_on_the_page(analysis: Analysis[Any, Any], store: Store, tmp_path: Path) -> None:
    job = _job(store, tmp_path, analysis.name)
    [outcome] = run_fits(store, [job], figures=False, force=True)
    summary = {"run_id": "r", "fits": [{**job.names, "status": "fitted", "analyses": outcome.summary}]}
    page = render_report(outcome.tables or {}, summary).text()
    assert f"<h3>{analysis.title}</h3>" in page


@pytest.mark.parametrize("analysis", ANALYSES, ids=IDS)
def test_data_it_cannot_fit_is_a_jurymeter_error_or_not_applicable(
    analysis: Analysis[Any, Any], store: Store, tmp_path: Path
) -> None:
    # A scope with no records (planning refuses such a population; a fit must still fail cleanly).
    job = _job(store, tmp_path, analysis.name)
    job = dataclasses.replace(job, settings=dataclasses.replace(job.settings, systems=("nobody",)))
    try:
        outcome = run_fit(job)[analysis.name]
    except JurymeterError:
        return
    assert outcome.status == "skipped"
    assert outcome.reason


@pytest.mark.parametrize("analysis", ANALYSES, ids=IDS)
def test_its_command_is_on_the_cli(analysis: Analysis[Any, Any]) -> None:
    from typer.main import get_command

    from jurymeter.cli import app

    assert analysis.name in get_command(app).commands  # type: ignore[attr-defined]


def test_registering_a_second_analysis_under_a_taken_name_or_table_is_refused() -> None:
    clash = ToyAnalysis()
    clash.name = "gstudy"  # type: ignore[misc]
    with pytest.raises(ConfigError, match="already registered"), registered_temporarily(clash):
        pass
    table = ToyAnalysis()
    table.tables = (Table("components", {"x": pl.Float64}, "a taken name"),)  # type: ignore[misc]
    with pytest.raises(ConfigError, match="already published by gstudy"), registered_temporarily(table):
        pass


# ------------------------------------------------------------------ a toy analysis, end to end


@dataclasses.dataclass(frozen=True, slots=True)
class ToyOptions:
    scale: float = 1.0


@dataclasses.dataclass(frozen=True, slots=True)
class ToyResult:
    means: tuple[tuple[str, float, int], ...]
    spread: float


class _ToyFitting:
    def __init__(self, scope: FitScope, options: ToyOptions) -> None:
        self.scope, self.options = scope, options

    def feeds(self) -> Mapping[str, Callable[[np.ndarray], object]]:
        return {}

    def finish(self) -> ToyResult:
        frame = (
            self.scope.records.group_by("system_id")
            .agg(pl.col("score").mean().alias("mean"), pl.len().alias("records"))
            .sort("system_id").collect()
        )
        means = tuple((s, float(m) * self.options.scale, int(n)) for s, m, n in frame.iter_rows())
        values = [m for _, m, _ in means]
        return ToyResult(means=means, spread=max(values) - min(values))


class ToyAnalysis(Analysis[ToyResult, ToyOptions]):
    """System means straight from the records: the smallest analysis the seam admits.

    One class implements every part: the fit (``start``), the tables
    (``tables``, ``tabulate``), the summary (``headline``, ``report``,
    ``summarize``), the page section (``section``) and the command.
    """

    name = "toy"
    title = "Toy system means"
    protocols = ("pointwise",)
    order = 90
    options_type = ToyOptions
    tables = (Table("toy_means", {"system_id": pl.String, "mean": pl.Float64, "records": pl.Int64},
                    "mean score per system"),)
    headline = (Headline("spread", "toy spread"),)

    def start(self, scope: FitScope, chunked: Any, options: ToyOptions) -> _ToyFitting:
        return _ToyFitting(scope, options)

    def report(self, result: ToyResult) -> dict[str, Any]:
        return {"means": [list(m) for m in result.means], "spread": result.spread}

    def tabulate(self, result: ToyResult) -> dict[str, list[dict[str, Any]]]:
        return {"toy_means": [{"system_id": s, "mean": m, "records": n} for s, m, n in result.means]}

    def summarize(self, result: ToyResult) -> dict[str, Any]:
        return {"spread": result.spread}

    def section(self, page: Any) -> None:
        rows = page.rows("toy_means")
        page.add(f"<p>toy section: {rows.height} systems, spread {page.summary.get('spread'):.6f}</p>")

    def register_command(self, app: Any) -> None:
        app.command(name="toy")(lambda: None)


def test_a_registered_toy_analysis_reaches_summary_tables_cache_and_page(store: Store, tmp_path: Path) -> None:
    with registered_temporarily(ToyAnalysis()):
        config = _config(store, tmp_path, 'analyses = ["gstudy", "toy"]\n[fit.toy]\nscale = 2.0\n')
        assert config.fit.options["toy"] == ToyOptions(scale=2.0)  # its [fit.toy] table, typed
        plan = plan_fits(store, config)
        assert all(("toy", ToyOptions(scale=2.0)) in job.analyses for job in plan.jobs)
        outcomes = run_fits(store, plan.jobs, figures=False)
        summary = publish_run(store, "toy-run", config=config, started="t", ingest_report=None,
                              outcomes=outcomes, timings={}, skipped=plan.skipped)
        folder = Path(store.root) / "results" / "toy-run"
        # The summary, the tables and the page carry it.
        on_disk = orjson.loads((folder / "summary.json").read_bytes())
        assert on_disk == orjson.loads(orjson.dumps(summary))
        expected = (
            store.scan("pointwise", "sim-chat").group_by("system_id")
            .agg((pl.col("score").mean() * 2).alias("mean"), pl.len().alias("records")).collect()
        )
        spread = float(expected["mean"].max() - expected["mean"].min())  # type: ignore[operator]
        [fit] = on_disk["fits"]
        assert fit["analyses"]["toy"] == {"status": "fitted", "reason": None, "seconds": pytest.approx(0, abs=60),
                                          "spread": pytest.approx(spread)}
        toy = pl.read_parquet(folder / "toy_means.parquet")
        assert toy.columns == ["item_set", "universe", "population", "system_id", "mean", "records"]
        got = dict(zip(toy["system_id"].to_list(), toy["mean"].to_list(), strict=True))
        assert got == pytest.approx(dict(expected.select("system_id", "mean").iter_rows()))
        page = report_text(folder / "report")
        assert "<h3>Toy system means</h3>" in page
        assert f"toy section: {toy.height} systems, spread {spread:.6f}" in page
        assert "toy spread" in page  # its headline column in the Fits table
        # The cache keeps it: a reused fit says the same.
        again = read_cached(store, plan.jobs[0], figures=False)
        assert again is not None
        assert again.summary == outcomes[0].summary
        assert again.tables["toy_means"].equals(outcomes[0].tables["toy_means"])  # type: ignore[index]
    # Unregistered, the pipeline no longer knows it.
    assert "toy" not in {a.name for a in registered()}
    assert "toy_means" not in schemas()


def test_each_analysis_says_its_own_seconds_in_the_summary_and_on_the_page(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Which analysis spends a fit's time: its own start, feeds and finish, apart from the others'."""
    pause = 0.3
    plain_finish = _ToyFitting.finish

    def slow_finish(self: _ToyFitting) -> ToyResult:
        time.sleep(pause)  # only the toy's finish waits: the time must land on the toy, not on gstudy
        return plain_finish(self)

    monkeypatch.setattr(_ToyFitting, "finish", slow_finish)
    with registered_temporarily(ToyAnalysis()):
        config = _config(store, tmp_path, 'analyses = ["gstudy", "toy"]\n')
        plan = plan_fits(store, config)
        outcomes = run_fits(store, plan.jobs, figures=False)
        summary = publish_run(store, "seconds-run", config=config, started="t", ingest_report=None,
                              outcomes=outcomes, timings={}, skipped=plan.skipped)
        [fit] = summary["fits"]
        toy, gstudy = fit["analyses"]["toy"]["seconds"], fit["analyses"]["gstudy"]["seconds"]
        assert toy >= pause
        assert 0 <= gstudy <= fit["seconds"] - pause
        assert toy + gstudy <= fit["seconds"]
        page = report_text(Path(store.root) / "results" / "seconds-run" / "report")
        named = re.search(r"s \(((?:[a-z]+ [0-9.]+ s(?:, )?)+)\)\.", page)
        assert named is not None
        spent = [(part.split()[0], float(part.split()[1])) for part in named.group(1).split(", ")]
        assert {name for name, _ in spent} == {"toy", "gstudy"}
        assert [sec for _, sec in spent] == sorted((sec for _, sec in spent), reverse=True)  # the slowest first


class _ProvenanceFitting:
    def __init__(self, scope: FitScope) -> None:
        self.scope = scope

    def feeds(self) -> Mapping[str, Callable[[np.ndarray], object]]:
        return {}

    def finish(self) -> ToyResult:
        records = self.scope.records.collect()
        assert self.scope.judge_health is not None
        failed = int(self.scope.judge_health["failed"].sum())
        return ToyResult(means=(("note", float(records["note"].null_count()), records.height),), spread=float(failed))


class ProvenanceAnalysis(ToyAnalysis):
    """Reads a stored column outside the schema and the judge health (the pairwise analysis does both)."""

    name = "provenance"
    title = "Provenance"
    protocols = ("pairwise",)
    tables = (Table("provenance_rows", {"system_id": pl.String, "mean": pl.Float64, "records": pl.Int64}, "rows"),)
    record_columns = ("note",)
    reads_judge_health = True

    def start(self, scope: FitScope, chunked: Any, options: ToyOptions) -> Any:
        return _ProvenanceFitting(scope)

    def tabulate(self, result: ToyResult) -> dict[str, list[dict[str, Any]]]:
        return {"provenance_rows": [{"system_id": s, "mean": m, "records": n} for s, m, n in result.means]}


def test_an_analysis_reads_its_extra_columns_and_the_judge_health_and_a_new_failure_changes_its_key(
    tmp_path: Path,
) -> None:
    from jurymeter.io.validate import ValidationOptions

    lines = [
        '{"item_set": "p", "item_id": "i1", "system_a": "x", "system_b": "y", "judge_id": "j", "winner": "A", "note": "kept"}',
        '{"item_set": "p", "item_id": "i2", "system_a": "y", "system_b": "x", "judge_id": "j", "winner": "tie"}',
    ]
    source = tmp_path / "pairs.jsonl"
    source.write_text("\n".join(lines) + "\n")
    store = Store(str(tmp_path / "store"))
    ingest(store, discover_sources([str(source)]), ValidationOptions())
    with registered_temporarily(ProvenanceAnalysis()):
        config = _config(store, tmp_path, 'analyses = ["provenance"]\n')
        [job] = plan_fits(store, config).jobs
        result = run_fit(job)["provenance"].result
        assert result.means == (("note", 1.0, 2),)  # "note" read with the records: null on the line without it
        assert result.spread == 0.0  # the judge health reached the scope: no failure yet
        # A source of the judge's failures (an MT-Bench pair line whose winner is "error") changes the key.
        failed = tmp_path / "failed_pair.jsonl"
        failed.write_text(
            '{"question_id": 81, "model_1": "x", "model_2": "y", "g1_winner": "error", "g2_winner": "error", '
            '"judge": ["j", "pair-v2"], "g1_user_prompt": "", "g1_judgment": "", "g2_user_prompt": "", '
            '"g2_judgment": "", "turn": 1, "tstamp": 1.0}\n'
        )
        ingest(store, discover_sources([str(failed)], log_format="mt-bench"), ValidationOptions())
        [again] = plan_fits(store, config).jobs
        assert any(p.startswith("quarantine") for p in again.inputs)
        assert again.key != job.key
        assert run_fit(again)["provenance"].result.spread == 2.0  # both games of the line, by their judge
