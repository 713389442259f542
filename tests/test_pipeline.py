"""The pipeline's contracts that are not one analysis's: the cache key, configuration checks, the CLI's run lines.

Independent references: a copy of the package edited on disk (the code
digest), hand-written configurations and their expected one-line errors, and
summaries written out by hand for the printed run lines.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

import jurymeter
from jurymeter.analyses.base import FitSettings
from jurymeter.errors import ConfigError
from jurymeter.pipeline.config import load_config
from jurymeter.pipeline.jobs import FitJob, code_digest

PACKAGE = Path(jurymeter.__file__).resolve().parent


def test_the_cache_key_follows_the_code_that_shapes_a_fit(tmp_path: Path) -> None:
    copy = tmp_path / "jurymeter"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = code_digest(copy)
    assert before == code_digest(PACKAGE)  # the same bytes, the same digest
    # A change to the statistics changes it (the old key, a static version string, did not).
    dstudy = copy / "stats" / "dstudy.py"
    dstudy.write_text(dstudy.read_text() + "\n# a change\n")
    changed = code_digest(copy)
    assert changed != before
    # A change to the CLI or the orchestration does not: they shape no number.
    for path in (copy / "cli" / "app.py", copy / "orchestration" / "flow.py"):
        path.write_text(path.read_text() + "\n# cosmetic\n")
    assert code_digest(copy) == changed
    job = FitJob(store="s", storage_options=(), item_set="x", universe="all", population="all",
                 settings=FitSettings(), analyses=(), inputs=(), code=before)
    assert dataclasses.replace(job, code=changed).key() != job.key()
    assert FitJob(store="s", storage_options=(), item_set="x", universe="all", population="all",
                  settings=FitSettings(), analyses=(), inputs=()).code == code_digest()


@pytest.mark.parametrize(
    ("fit", "message"),
    [
        ('generations = "facets"', "generations must be one of average, facet, got 'facets'"),
        ('interval = "bca"', "interval must be one of pivotal, percentile, got 'bca'"),
        ("n_boot = 0", "n_boot must be at least 1, got 0"),
        ("target = 1.5", "target must be in (0, 1), got 1.5"),
        ('analyses = ["gstudy", "pairs"]', "analyses names 'pairs' (registered: gstudy, latent, cyclic, pairwise"),
        ("[fit.nonesuch]\nx = 1", "[fit.nonesuch] names no analysis"),
        ("[fit.gstudy]\nscreen = 1.0", "[fit.gstudy]: unknown key(s) screen (known: estimator, fixed, henderson_intervals, item_pool, judge_pool, screen_threshold)"),
        ("[fit.cyclic]\nbudgets = [5, 'ten']", "budgets must be a list of integers"),
    ],
)
def test_fit_settings_are_checked_when_the_configuration_is_read(tmp_path: Path, fit: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(f"[fit]\n{fit}\n")
    with pytest.raises(ConfigError, match=re.escape(message)) as info:
        load_config(path, environ={})
    assert "bad.toml" in str(info.value)


def test_analysis_options_are_read_typed(tmp_path: Path) -> None:
    from jurymeter.analyses.cyclic import CyclicOptions
    from jurymeter.analyses.gstudy import GStudyOptions

    path = tmp_path / "ok.toml"
    path.write_text("[fit]\nanalyses = [\"gstudy\"]\n[fit.gstudy]\nscreen_threshold = 2\n[fit.cyclic]\nbudgets = [5, 10]\n")
    config = load_config(path, environ={})
    assert config.fit.options == {"gstudy": GStudyOptions(screen_threshold=2.0),
                                  "cyclic": CyclicOptions(budgets=(5, 10))}
    from jurymeter.pipeline.jobs import enabled_analyses

    assert [a.name for a in enabled_analyses(config)] == ["gstudy"]


def test_the_config_option_help_names_the_storage_options_table() -> None:
    from typer.testing import CliRunner

    from jurymeter.cli import app

    for command in ("ingest", "gstudy", "cyclic", "report"):
        result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert "`store` and a [storage_options] table" in result.output, command


def test_the_run_summary_prints_headlines_skipped_item_sets_and_timings_in_seconds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from jurymeter.cli.run import print_run_summary

    summary = {
        "run_id": "r1", "status": "complete", "store": "/s", "ingest": None,
        "fits": [{"item_set": "chat", "universe": "all", "population": "all", "status": "reused",
                  "error": None, "analyses": {
                      "gstudy": {"status": "fitted", "erho2": 0.9111, "ceiling": 0.74, "mdd95": 0.457},
                      "cyclic": {"status": "skipped", "reason": "needs two generations"}}}],
        "skipped": [{"item_set": "arena", "protocol": "pairwise", "reason": "no analysis applies (why)"}],
        "timings": {"ingest": 1.234, "fits": 20.0},
    }
    print_run_summary(summary)
    printed = capsys.readouterr().out
    row = next(line for line in printed.splitlines() if "chat" in line and "reused" in line)
    assert re.search(r"reused.*0\.911.*0\.740.*0\.457", row), row
    assert "not fitted: pairwise item set arena: no analysis applies (why)" in printed
    assert "cyclic not run on chat / all / all: needs two generations" in printed
    assert "timings ingest 1.2 s, fits 20.0 s" in printed
    assert "{" not in printed  # no Python dict


def test_cyclic_false_leaves_cyclicjudge_out_like_naming_the_other_analyses(tmp_path: Path) -> None:
    from jurymeter.pipeline.jobs import enabled_analyses

    path = tmp_path / "off.toml"
    path.write_text("[fit]\ncyclic = false\n")
    assert [a.name for a in enabled_analyses(load_config(path, environ={}))] == ["gstudy", "pairwise", "sequential"]
    assert [a.name for a in enabled_analyses(load_config(None, environ={}))] == [
        "gstudy", "cyclic", "pairwise", "sequential"]
