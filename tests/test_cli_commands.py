"""The analyses' commands: built from their declarations, read ``--config`` as ``run`` does, flags over the file.

Independent references: the flags each command had before its declaration
existed (written out here), the ``intervals.n_boot`` and ``block`` of the
report (what the fit really used), and the package's files read as text for
the imports and the code digest.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from ingest_util import run_ingest
from jurymeter.cli import app
from jurymeter.io.store import Store
from jurymeter.simulate import SimulationParams, simulate_dump, write_dump

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "jurymeter"
PARAMS = SimulationParams(seed=5, n_systems=4, n_items=16, n_judges=4, n_generations=2, n_replicates=1,
                          round_scores=False, carry_over=0.0, pairwise_pairs=None)

# Every flag of the analyses' commands before they were declared as data (issue 23): each still works.
FLAGS = {
    "gstudy": ("--item-set", "--store", "--storage-option", "--config", "--universe", "--population",
               "--generations", "--boot", "--seed", "--target", "--interval", "--json", "--screen-threshold",
               "--screened-out", "--estimator", "--henderson-intervals"),
    "cyclic": ("--item-set", "--store", "--storage-option", "--config", "--budgets", "--at-generations",
               "--at-judges", "--json", "--universe", "--population"),
    "pairwise": ("--item-set", "--store", "--storage-option", "--config", "--universe", "--population", "--boot",
                 "--permutations", "--resample-judges", "--anchor", "--baseline", "--seed", "--json"),
    "sequential": ("--item-set", "--store", "--storage-option", "--config", "--universe", "--population", "--lags",
                   "--boot", "--unit", "--top-k", "--group-a", "--group-b", "--reference", "--simulations", "--seed",
                   "--json"),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root = tmp_path_factory.mktemp("commands")
    paths = write_dump(simulate_dump(PARAMS), root / "dump")
    target = Store(str(root / "store"))
    run_ingest(target, paths["pointwise"], paths["systems"], paths["judges"])
    return target


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_every_flag_of_before_is_on_the_command(name: str) -> None:
    from typer.main import get_command

    command = get_command(app).commands[name]  # type: ignore[attr-defined]
    declared = {opt for param in command.params for opt in param.opts}
    assert set(FLAGS[name]) <= declared, sorted(set(FLAGS[name]) - declared)


def _gstudy(store: Store, *args: str) -> dict:
    result = CliRunner().invoke(app, ["gstudy", "--item-set", "sim-chat", "--json", *args])
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def test_the_config_file_sets_what_no_flag_gave_and_a_flag_overrides_it(store: Store, tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'store = "{store.url}"\n[fit]\nn_boot = 30\n[fit.gstudy]\nscreen_threshold = 0.25\n')
    from_file = _gstudy(store, "--config", str(config))
    assert from_file["intervals"]["n_boot"] == 30  # [fit] n_boot, not the flag's default (800)
    assert from_file["items"]["screen_threshold"] == 0.25  # [fit.gstudy]
    flagged = _gstudy(store, "--config", str(config), "--boot", "40", "--screen-threshold", "0.5")
    assert flagged["intervals"]["n_boot"] == 40
    assert flagged["items"]["screen_threshold"] == 0.5
    # A flag given with its default's value is still given: it overrides the file.
    assert _gstudy(store, "--config", str(config), "--boot", "800", "--seed", "0")["intervals"]["n_boot"] == 800


def test_cyclic_takes_a_universe_and_a_population(store: Store, tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f'store = "{store.url}"\n[universes]\nthree = ["judge-a", "judge-b", "judge-c"]\n'
                      '[populations]\ntwo = ["sys-00", "sys-01"]\n')
    result = CliRunner().invoke(app, ["cyclic", "--config", str(config), "--item-set", "sim-chat", "--json",
                                      "--universe", "three", "--population", "two"])
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert report["block"]["judges"] == 3
    assert set(report["systems"]) == {"sys-00", "sys-01"}


def test_nothing_below_the_cli_imports_it() -> None:
    # Relative imports counted too: resolved against the importing module's package.
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[0] == "cli":
            continue
        package = ["jurymeter", *parts[:-1]]  # what a relative import of this module is relative to
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                names = [".".join([*base, node.module] if node.module else base)]
            for name in names:
                assert name.split(".")[:2] != ["jurymeter", "cli"], (path, name)


def test_a_command_declarations_text_does_not_change_the_fits_key(tmp_path: Path) -> None:
    from jurymeter.pipeline.jobs import code_digest

    copy = tmp_path / "jurymeter"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = code_digest(copy)
    declaration = copy / "analyses" / "gstudy" / "command.py"
    declaration.write_text(declaration.read_text().replace("Parametric bootstrap resamples", "Bootstrap draws"))
    cli = copy / "cli" / "common.py"
    cli.write_text(cli.read_text() + "\n# a comment\n")
    assert code_digest(copy) == before
    analysis = copy / "analyses" / "gstudy" / "__init__.py"
    analysis.write_text(analysis.read_text() + "\n# a comment\n")
    assert code_digest(copy) != before


def test_a_flag_left_out_sets_no_key() -> None:
    from jurymeter.analyses.commands import command_of
    from jurymeter.analyses.cyclic import CYCLIC
    from jurymeter.cli.analyses import overrides_of

    command = command_of(CYCLIC.command)
    assert command is not None
    assert overrides_of("cyclic", command, {}) == ({}, {})
    overrides, flags = overrides_of("cyclic", command, {"flag_budgets": "4,8", "flag_at_judges": 2})
    assert overrides == {"fit.cyclic.budgets": (4, 8), "fit.cyclic.at_judges": 2}
    assert flags == {"fit.cyclic.budgets": "--budgets", "fit.cyclic.at_judges": "--at-judges"}


def _text(store: Store, name: str, *args: str) -> str:
    result = CliRunner().invoke(app, [name, "--store", store.url, "--item-set", "sim-chat", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_gstudy_prints_the_leaderboard_and_judge_offsets_and_folds_its_notes(store: Store) -> None:
    """The terminal says what the JSON says: each system's mean and rank range, each judge's offset; notes counted."""
    report = orjson.loads(_text(store, "gstudy", "--boot", "30", "--json"))
    text = _text(store, "gstudy", "--boot", "30")
    lines = text.splitlines()
    for row in report["leaderboard"]:
        [line] = [x for x in lines if f" {row['system_id']} " in x]
        assert f"{row['mean']:.3f}" in line
        assert f"{row['rank_low']}-{row['rank_high']}" in line
    for row in report["judge_offsets"]:
        [line] = [x for x in lines if f" {row['judge_id']} " in x]
        assert f"{row['offset']:.3f}" in line
        assert f"[{row['low']:.3f}, {row['high']:.3f}]" in line
    notes = (len(report["block"]["notes"]) + len(report.get("design_notes") or [])
             + sum(len(report.get(k) or {}) for k in ("null_reasons", "truncated", "extrapolated")))
    assert notes > 5  # clean simulated data still carry many notes
    assert f"{notes} notes: --verbose lists them" in text
    assert "extrapolated beyond the observed sizes:" not in text
    verbose = _text(store, "gstudy", "--boot", "30", "--verbose")
    assert "--verbose lists them" not in verbose
    assert sum(x.startswith(("note: ", "design ", "not estimable: ", "at a bound: ", "extrapolated beyond"))
               for x in verbose.splitlines()) == notes


def test_the_naive_bootstraps_words_follow_the_ratio() -> None:
    from jurymeter.analyses.gstudy.command import naive_comparison

    wider = naive_comparison(0.582, 0.535, 0.535 / 0.582)
    assert "understates" not in wider
    assert "the naive half-width is the wider (1.09x the MDD95)" in wider
    assert naive_comparison(0.604, 1.238, 1.238 / 0.604).endswith("understates 2.05x")
    assert "about equal" in naive_comparison(1.0, 1.001, 1.001)
    assert naive_comparison(None, None, None).endswith("ratio n/a")


@pytest.mark.parametrize(("ranges", "groups"), [
    ([(1, 1), (2, 2)], [1, 2]),
    ([(1, 2), (1, 3), (3, 4), (5, 6), (5, 6)], [1, 1, 1, 2, 2]),
    ([(1, 3), (2, 2), (3, 3), (4, 4)], [1, 1, 1, 2]),  # a chain through the wide first range
])
def test_pairwise_groups_are_the_chains_of_overlapping_rank_ranges(ranges: list, groups: list) -> None:
    from jurymeter.analyses.pairwise.command import rank_range_groups

    assert rank_range_groups(ranges) == groups


def test_pairwise_prints_groups_that_agree_with_the_rank_ranges(capsys: pytest.CaptureFixture[str]) -> None:
    """Overlapping rating intervals, rank ranges 1-1 and 2-2: two groups, and a line saying why they are apart."""
    from jurymeter.analyses.pairwise.command import print_pairwise

    def system(rank: int, low: float, high: float, rank_low: int, rank_high: int, tie_group: int) -> dict:
        return {"rating_elo": (low + high) / 2, "low_elo": low, "high_elo": high, "rank": rank,
                "rank_low": rank_low, "rank_high": rank_high, "tie_group": tie_group}

    report = {"item_set": "s", "games": 10, "outcomes": 10, "systems": 3, "items": 5, "judges": {},
              "both_orders_share": None, "bradley_terry": {"interval_ratio": 1.0, "systems": {
                  "top": system(1, 1057, 1105, 1, 1, 1), "next": system(2, 1000, 1064, 2, 2, 1),
                  "third": system(3, 990, 1050, 2, 3, 2)}}}
    print_pairwise(report)
    lines = capsys.readouterr().out.splitlines()
    group = {name: next(x for x in lines if f" {name} " in x).split()[-2] for name in ("top", "next", "third")}
    assert group == {"top": "1", "next": "2", "third": "2"}  # not the tie groups 1, 1, 2
    assert any(x.startswith("top and next: rating intervals overlap") for x in lines)
    assert not any(x.startswith("next and third") for x in lines)  # one group: nothing to explain


def test_every_symbol_is_explained_in_the_help_of_the_app_and_of_each_analysis_command() -> None:
    """Issue 24 point 6: Eρ², Φ, MDD, ceiling, logit and slot-A advantage explained in --help too."""
    import re

    from typer.testing import CliRunner

    from jurymeter.analyses import registered
    from jurymeter.cli import app
    from jurymeter.render.text import GLOSSARY

    commands = [[]] + [[a.name] for a in registered() if a.command is not None]
    assert len(commands) > 1
    for args in commands:
        result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "100"})
        assert result.exit_code == 0, result.output
        text = re.sub(r"\s+", " ", re.sub(r"[│╭╮╰╯─]", " ", result.output))
        for term, _, meaning in GLOSSARY:
            assert f"{term}: {meaning}." in text, (args, term)


def test_no_command_s_help_loses_text_to_rich_markup() -> None:
    """Rich reads ``[word]`` in a docstring as a style tag and drops it: ``run --help`` once said
    "a limit of ```` failed". Every command and subcommand's help is rendered and searched for an
    emptied literal or an emptied bracket."""
    import typer.main

    def paths(command: object, prefix: list[str]) -> list[list[str]]:
        found = [prefix]
        if hasattr(command, "commands"):  # a group (Typer's own click: no click.Group to test for)
            for name, sub in command.commands.items():
                found += paths(sub, [*prefix, name])
        return found

    every = paths(typer.main.get_command(app), [])
    assert ["run"] in every
    assert len(every) > 10
    for args in every:
        result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (args, result.output)
        assert "````" not in result.output, args
        assert "()" not in result.output, args
        assert "[]" not in result.output, args


def test_verbose_is_a_flag_only_of_commands_whose_printout_folds_notes() -> None:
    # A flag that does nothing is a lie in --help: cyclic, pairwise and sequential print no notes to list.
    from typer.testing import CliRunner

    from jurymeter.analyses import registered
    from jurymeter.analyses.commands import command_of
    from jurymeter.cli import app

    for analysis in registered():
        command = command_of(analysis.command)
        if command is None:
            continue
        shown = CliRunner().invoke(app, [analysis.name, "--help"], env={"COLUMNS": "200"}).output
        assert ("--verbose" in shown) == command.notes, analysis.name
    refused = CliRunner().invoke(app, ["cyclic", "--item-set", "x", "--verbose"])
    assert refused.exit_code == 2
    assert "No such option: --verbose" in refused.output
