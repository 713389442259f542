"""A user's mistakes on every path: exit 1, one line naming the flag or key as written, no traceback, nothing started.

Independent reference: the issue's list of user errors (issue 23, "Validation"),
each written here as the user typed it. "Nothing started" is checked two ways
that can fail: ``run``'s environment (the Prefect server and the Dask cluster,
:func:`jurymeter.orchestration.runtime.run_environment`) is replaced by one that
fails the test if entered, and no process named like Prefect, Dask or uvicorn is
a child of this one afterwards (psutil).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from typer.testing import CliRunner

from ingest_util import run_ingest
from jurymeter.cli import app
from jurymeter.io.store import Store
from jurymeter.simulate import SimulationParams, simulate_dump, write_dump

PARAMS = SimulationParams(seed=3, n_systems=4, n_items=12, n_judges=3, n_generations=1, n_replicates=1,
                          pairwise_pairs=None)
STARTED = ("prefect", "dask", "distributed", "uvicorn")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root = tmp_path_factory.mktemp("user-errors")
    paths = write_dump(simulate_dump(PARAMS), root / "dump")
    target = Store(str(root / "store"))
    run_ingest(target, paths["pointwise"], paths["systems"], paths["judges"])
    return target


@pytest.fixture(autouse=True)
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Entering the run's environment (Prefect's server, Dask's cluster) fails the test."""
    from jurymeter.orchestration import runtime

    @contextlib.contextmanager
    def refuse(*args: Any, **kwargs: Any) -> Iterator[str]:
        pytest.fail("a user error reached the start of Prefect and Dask")
        yield ""

    monkeypatch.setattr(runtime, "run_environment", refuse)
    # Only processes the test started count: under xdist this worker may hold a Prefect server of
    # another file's session fixture, and earlier tests' exited children linger as zombies.
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    names = " ".join(_command_line(p) for p in psutil.Process().children(recursive=True) if p.pid not in before)
    assert not any(word in names for word in STARTED), names


def _command_line(process: psutil.Process) -> str:
    """A child's command line; a zombie's name (it ran, and exited); nothing for one gone meanwhile."""
    try:
        return " ".join(process.cmdline())
    except psutil.ZombieProcess:
        with contextlib.suppress(psutil.Error):
            return process.name()
    except psutil.NoSuchProcess:
        pass
    return ""


def _config(store: Store, tmp_path: Path, body: str = "", landing: str | None = None) -> Path:
    path = tmp_path / "c.toml"
    where = str(landing) if landing else str(tmp_path / "no-landing")
    path.write_text(f'store = "{store.url}"\nlanding = "{where}"\nhome = "{tmp_path / "home"}"\n{body}')
    return path


def _one_line(args: list[str], *names: str, absent: tuple[str, ...] = ()) -> str:
    """Run the CLI; the one line it printed, which names each of ``names`` and none of ``absent``."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), result.exception
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    line = lines[0]
    assert line.startswith("error: "), line
    for name in names:
        assert name in line, (name, line)
    for name in absent:
        assert name not in line, (name, line)
    return line


TYPO = '[universes]\ntypo = ["judge-a", "jduge-b"]\n'  # a judge id the item set lacks (judge-b, misspelt)


def test_gstudy_universe_naming_a_judge_the_item_set_lacks(store: Store, tmp_path: Path) -> None:
    config = _config(store, tmp_path, TYPO)
    line = _one_line(["gstudy", "--config", str(config), "--item-set", "sim-chat", "--universe", "typo"],
                     "--universe", "'jduge-b'", "[universes] typo")
    assert "judge-a" in line  # what the item set holds, to pick from


def test_every_analysis_command_checks_its_universe_and_population(store: Store, tmp_path: Path) -> None:
    config = _config(store, tmp_path, TYPO + '[populations]\nghosts = ["nobody"]\n')
    for command in ("gstudy", "cyclic", "sequential"):
        _one_line([command, "--config", str(config), "--item-set", "sim-chat", "--universe", "typo"], "--universe")
        _one_line([command, "--config", str(config), "--item-set", "sim-chat", "--population", "ghosts"],
                  "--population", "'nobody'")


def test_run_universe_naming_a_judge_the_item_set_lacks(store: Store, tmp_path: Path) -> None:
    config = _config(store, tmp_path, TYPO + '[fit]\nuniverses = ["all", "typo"]\n')
    _one_line(["run", "--config", str(config)], "[universes] typo", "'jduge-b'")


def test_run_universe_typo_in_a_real_process_starts_no_prefect(store: Store, tmp_path: Path) -> None:
    # A process of its own: its stderr is the user's terminal, and Prefect's home (made
    # first when the run's environment starts) must not exist afterwards.
    config = _config(store, tmp_path, TYPO + '[fit]\nuniverses = ["all", "typo"]\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DASK_", "JURYMETER_"))}
    result = subprocess.run([sys.executable, "-m", "jurymeter.cli", "run", "--config", str(config)],
                            capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert "[universes] typo" in result.stderr
    assert not (tmp_path / "home" / "prefect").exists()


def test_run_universe_typo_with_dumps_in_the_landing_is_found_before_anything_starts(
        store: Store, tmp_path: Path) -> None:
    # The landing holds dumps (already ingested): the run ingests them first, then the plan fails.
    landing = Path(store.root).parent / "dump"
    config = _config(store, tmp_path, TYPO + '[fit]\nuniverses = ["all", "typo"]\n', landing=str(landing))
    result = CliRunner().invoke(app, ["run", "--config", str(config)])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1
    assert "[universes] typo" in errors[0]


@pytest.mark.parametrize("boot", ["0", "-1"])
def test_pairwise_boot_below_one(boot: str, store: Store) -> None:
    _one_line(["pairwise", "--store", store.url, "--item-set", "sim-chat", "--boot", boot],
              "--boot", "at least 1", f"got {boot}")


def test_gstudy_boot_zero_names_the_flag_not_a_class(store: Store) -> None:
    _one_line(["gstudy", "--store", store.url, "--item-set", "sim-chat", "--boot", "0"],
              "--boot must be at least 1, got 0", absent=("GStudyRequest", "n_boot"))


def test_run_boot_zero_blames_the_flag_not_the_config_file(store: Store, tmp_path: Path) -> None:
    config = _config(store, tmp_path)
    _one_line(["run", "--config", str(config), "--boot", "0"], "--boot must be at least 1, got 0",
              absent=("c.toml", "[fit]", "configuration"))


@pytest.mark.parametrize(("flag", "value", "allowed"), [
    ("--generations", "avrage", "average, facet"),
    ("--interval", "foo", "pivotal, percentile"),
    ("--estimator", "reml", "auto, henderson, balanced"),
    ("--henderson-intervals", "bca", "auto, records, chisquare"),
    ("--target", "1.5", "in (0, 1)"),
])
def test_gstudy_choice_and_range_typos(flag: str, value: str, allowed: str, store: Store) -> None:
    _one_line(["gstudy", "--store", store.url, "--item-set", "sim-chat", flag, value], flag, allowed, repr(value)
              if flag != "--target" else value)


@pytest.mark.parametrize(("args", "flag"), [
    (["sequential", "--unit", "judge"], "--unit"),
    (["sequential", "--lags", "4"], "--lags"),
    (["sequential", "--top-k", "0"], "--top-k"),
    (["pairwise", "--permutations", "0"], "--permutations"),
    (["cyclic", "--at-judges", "0"], "--at-judges"),
    (["cyclic", "--budgets", "5,ten"], "--budgets"),
])
def test_the_other_commands_name_their_flags(args: list[str], flag: str, store: Store) -> None:
    _one_line([*args, "--store", store.url, "--item-set", "sim-chat"], flag)


def test_run_workers_zero_names_the_flag(store: Store, tmp_path: Path) -> None:
    config = _config(store, tmp_path)
    _one_line(["run", "--config", str(config), "--workers", "0"], "--workers must be at least 1, got 0")
    config = _config(store, tmp_path, "[dask]\nthreads_per_worker = 0\n")
    _one_line(["run", "--config", str(config)], "c.toml [dask] threads_per_worker must be at least 1")


def test_a_config_key_outside_what_it_admits_names_the_key(store: Store, tmp_path: Path) -> None:
    config = _config(store, tmp_path, "[fit.pairwise]\nn_boot = 0\n")
    _one_line(["gstudy", "--config", str(config), "--item-set", "sim-chat"], "c.toml [fit.pairwise] n_boot",
              "at least 1")
    config = _config(store, tmp_path, "[fit]\nn_boot = 0\n")
    _one_line(["run", "--config", str(config)], "c.toml [fit] n_boot must be at least 1, got 0")


def test_a_flag_overrides_the_config_key_it_would_blame(store: Store, tmp_path: Path) -> None:
    # [fit.pairwise] n_boot = 0 is wrong, but --boot 0 on the command line is what the user wrote last.
    config = _config(store, tmp_path, "[fit.pairwise]\nn_boot = 5\n")
    _one_line(["pairwise", "--config", str(config), "--item-set", "sim-chat", "--boot", "0"], "--boot",
              absent=("c.toml",))


def test_demo_in_a_folder_that_cannot_be_made(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _one_line(["demo", "--workdir", str(blocker / "demo")], "--workdir")


def test_a_path_that_cannot_be_written(store: Store, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    _one_line(["gstudy", "--store", store.url, "--item-set", "sim-chat", "--boot", "20",
               "--screened-out", str(blocker / "screened.txt")], "--screened-out")
    _one_line(["plan", "--store", store.url, "--item-set", "sim-chat", "--out", str(blocker / "plan.csv")], "--out")


def test_the_choice_lists_are_the_statistics_own() -> None:
    from jurymeter.analyses.commands import GENERATION_MODES, INTERVAL_METHODS
    from jurymeter.analyses.gstudy import ESTIMATOR_CHOICES, HENDERSON_INTERVAL_CHOICES
    from jurymeter.stats import reliability

    assert GENERATION_MODES == reliability.GENERATION_MODES
    assert INTERVAL_METHODS == reliability.INTERVAL_METHODS
    assert set(ESTIMATOR_CHOICES) == set(reliability.ESTIMATORS)
    assert set(HENDERSON_INTERVAL_CHOICES) == set(reliability.HENDERSON_INTERVALS)
