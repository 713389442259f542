"""``jurymeter check`` (issue 24, point 3): every gate both ways, the exit codes, ``--json``, user errors.

Independent reference: a run folder written here by hand (``summary.json``, the
``dstudy`` and ``pairwise_judges`` tables), whose values the limits are chosen
around; the exit codes and the JSON keys are README's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
import typer
from typer.testing import CliRunner

from jurymeter.cli.app import app
from jurymeter.cli.check import GATE_FAILED, gates_at_end_of_run
from jurymeter.io.store import Store
from jurymeter.pipeline.tables import schemas

RUN_ID = "20260301T000000Z"
NULL_RUN = "20260228T000000Z"  # also a fit whose MDD95 is not estimable
FIT = {"item_set": "chat", "universe": "all", "population": "all"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("check") / "store"
    target = Store(str(root))
    dstudy = [{**FIT, "quantity": q, "estimate": v, "low": None, "high": None, "reason": None}
              for q, v in (("mdd95", 0.42), ("erho2", 0.81), ("ceiling", 0.9))]
    _write_run(target, NULL_RUN, [*dstudy, {**FIT, "universe": "three", "quantity": "mdd95", "estimate": None,
                                            "low": None, "high": None, "reason": "too few judges"}])
    _write_run(target, RUN_ID, dstudy)
    return str(root)


def _write_run(target: Store, run_id: str, dstudy: list[dict[str, Any]]) -> None:
    folder = f"results/{run_id}"
    judges = [{**FIT, "judge_id": "judge-a", "reversal_rate": 0.61, "reversal_low": 0.55, "reversal_high": 0.67},
              {**FIT, "judge_id": "judge-b", "reversal_rate": 0.30, "reversal_low": 0.25, "reversal_high": 0.35}]
    for table, rows in (("dstudy", dstudy), ("pairwise_judges", judges)):
        schema = schemas()[table]
        target.write_parquet(f"{folder}/{table}.parquet",
                             pl.DataFrame([{c: r.get(c) for c in schema} for r in rows], schema=schema))
    summary = {"run_id": run_id, "status": "complete", "fits": [],
               "judges": [{"judge_id": "judge-a", "stored": 96, "failed": 4, "failed_share": 0.04},
                          {"judge_id": "judge-b", "stored": 100, "failed": 0, "failed_share": 0.0}]}
    target.write_bytes(f"{folder}/summary.json", orjson.dumps(summary))
    target.write_json("results/latest.json", {"run_id": run_id, "path": target.path(folder)})


def _check(store: str, *args: str) -> Any:
    return CliRunner().invoke(app, ["check", *args, "--store", store])


def _json(store: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = _check(store, *args, "--json")
    return result.exit_code, orjson.loads(result.stdout)


# gate flag, a limit the run passes, one it fails, the failures that limit names
GATES = [
    ("--max-mdd", "0.5", "0.4", ["fit chat / all / all"]),
    ("--min-erho2", "0.8", "0.85", ["fit chat / all / all"]),
    ("--max-reversal", "0.65", "0.5", ["judge judge-a on chat (pairwise) / all / all"]),
    ("--max-failure", "0.05", "0.03", ["judge judge-a"]),
]


@pytest.mark.parametrize(("flag", "passing", "failing", "named"), GATES)
def test_every_gate_passes_and_fails(store: str, flag: str, passing: str, failing: str, named: list[str]) -> None:
    code, result = _json(store, "latest", flag, passing)
    assert code == 0
    assert result["passed"] is True
    [gate] = result["gates"]
    assert gate["gate"] == flag[2:].replace("-", "_")
    assert gate["failures"] == []
    assert gate["checked"] >= 1
    code, result = _json(store, RUN_ID, flag, failing)
    assert code == GATE_FAILED == 7
    assert result["passed"] is False
    [gate] = result["gates"]
    assert [f["subject"] for f in gate["failures"]] == named
    assert all(f["limit"] == float(failing) for f in gate["failures"])


def test_the_text_names_each_failed_gate_with_its_value_and_limit(store: str) -> None:
    result = _check(store, NULL_RUN, "--max-mdd", "0.4", "--max-reversal", "0.5")
    assert result.exit_code == 7
    said = " ".join(result.output.split())
    assert "gate max_mdd failed: fit chat / all / all: 0.42, limit at most 0.4" in said
    assert "gate max_mdd failed: fit chat / three / all: not estimable (too few judges), limit at most 0.4" in said
    assert "gate max_reversal failed: judge judge-a on chat (pairwise) / all / all: 0.61, limit at most 0.5" in said
    assert f"run {NULL_RUN}: gates failed" in said


def test_a_null_value_fails_its_gate_whatever_the_limit(store: str) -> None:
    code, result = _json(store, NULL_RUN, "--max-mdd", "100")
    assert code == 7
    [failure] = result["gates"][0]["failures"]
    assert (failure["subject"], failure["value"], failure["reason"]) == ("fit chat / three / all", None, "too few judges")


def test_the_json_shape(store: str) -> None:
    code, result = _json(store, "--min-erho2", "0.85")
    assert code == 7
    assert set(result) == {"run_id", "passed", "gates"}
    assert result["run_id"] == RUN_ID
    [gate] = result["gates"]
    assert set(gate) == {"gate", "limit", "checked", "failures"}
    assert gate["failures"] == [{"gate": "min_erho2", "subject": "fit chat / all / all", "value": 0.81,
                                 "limit": 0.85, "reason": None}]


def test_gates_come_from_the_configuration_and_flags_override_them(store: str, tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[gates]\nmin_erho2 = 0.85\n")
    assert _check(store, "--config", str(config)).exit_code == 7
    assert _check(store, "--config", str(config), "--min-erho2", "0.8").exit_code == 0


@pytest.mark.parametrize(("args", "message"), [
    (["no-such-run", "--max-mdd", "1"], "not a published run"),
    (["--max-mdd", "-1"], "--max-mdd must be above 0"),
    (["--min-erho2", "2"], "--min-erho2 must be in [0, 1]"),
    ([], "no gate to check"),
])
def test_a_user_error_is_one_line_and_exit_1(store: str, args: list[str], message: str) -> None:
    result = _check(store, *args)
    assert result.exit_code == 1
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: ")
    assert message in lines[0]


def test_no_run_yet_is_a_user_error(tmp_path: Path) -> None:
    result = _check(str(tmp_path / "empty"), "--max-mdd", "1")
    assert result.exit_code == 1
    assert "no run in" in result.output


def test_the_end_of_run_checks_the_configured_gates(store: str, tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    summary = {"run_id": RUN_ID}
    gates_at_end_of_run(None, {"store": store}, summary, {})  # no [gates]: nothing checked, no exit
    config.write_text("[gates]\nmax_failure = 0.05\n")
    gates_at_end_of_run(config, {"store": store}, summary, {})
    config.write_text("[gates]\nmax_failure = 0.03\n")
    with pytest.raises(typer.Exit) as raised:
        gates_at_end_of_run(config, {"store": store}, summary, {})
    assert raised.value.exit_code == 7
