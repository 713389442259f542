"""``jurymeter quarantine``, the quarantine table of ``store info`` and the records ``ingest`` shows.

The inputs are written here line by line and every rejected line's reason is
counted by hand (``EXPECTED``); the raw text is checked against the file's own
lines read with the standard library, CSV output with :mod:`csv`, JSON with
:mod:`json`.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from jurymeter.cli import app

runner = CliRunner()


def good(k: int) -> str:
    return json.dumps({"item_set": "chat", "item_id": f"q{k}", "system_id": f"s{k % 3}", "judge_id": "j1",
                       "score": 1 + k % 10})


def wrong_type(k: int) -> str:
    return json.dumps({"item_set": "chat", "item_id": f"w{k}", "system_id": "s1", "judge_id": "j1",
                       "score": f"high {k}"})


# a/dump.jsonl: 30 lines; 23 rejected (20 wrong_type, 1 malformed, 1 missing score, 1 out of scale), 7 kept.
A_LINES = (
    [good(1), wrong_type(2), good(3), '{"broken": "x,y", "q": "a\\"b', json.dumps(
        {"item_set": "chat", "item_id": "q5", "system_id": "s1", "judge_id": "j1"}),
     json.dumps({"item_set": "chat", "item_id": "q6", "system_id": "s1", "judge_id": "j1", "score": 99}), good(7)]
    + [wrong_type(k) for k in range(8, 27)] + [good(k) for k in range(27, 31)]
)
# b/dump.jsonl (the same file name in another folder): 2 rejected.
B_LINES = [good(101), wrong_type(102), "not json, \"quoted\", and long " + "x" * 200]
# c/other.csv: the header is line 1; line 3 misses its score.
C_LINES = ["item_set,item_id,system_id,judge_id,score", "chat,c1,s1,j2,5", "chat,c2,s1,j2,", "chat,c3,s2,j2,6"]

EXPECTED = (  # (folder, line, reason), counted by hand from the lines above
    [("a", 2, "wrong_type"), ("a", 4, "malformed_line"), ("a", 5, "missing_field"), ("a", 6, "score_out_of_scale")]
    + [("a", line, "wrong_type") for line in range(8, 27)]
    + [("b", 2, "wrong_type"), ("b", 3, "malformed_line"), ("c", 3, "missing_field")]
)
TOTAL = 4 + 19 + 3  # 26


@pytest.fixture(scope="module")
def inputs() -> Iterator[dict[str, Any]]:
    # A short folder of its own, not tmp_path_factory's: the tables' rows and titles checked below
    # hold two full paths and must fit one 160-column line, which pytest's folder (longer under
    # pytest-xdist by a popen-gwN/ part, and with each session number) does not leave room for.
    root = Path(tempfile.mkdtemp(prefix="jmq-"))
    try:
        yield _write_inputs(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _write_inputs(root: Path) -> dict[str, Any]:
    files = {}
    for folder, name, lines in (("a", "dump.jsonl", A_LINES), ("b", "dump.jsonl", B_LINES),
                                ("c", "other.csv", C_LINES)):
        (root / folder).mkdir()
        files[folder] = root / folder / name
        files[folder].write_text("\n".join(lines) + "\n")
    store = str(root / "store")
    ingested = runner.invoke(app, ["ingest", *(str(f) for f in files.values()), "--store", store, "--scale", "1,10"])
    assert ingested.exit_code == 0, ingested.output
    return {"root": root, "files": files, "store": store, "ingest": ingested}


def _lines(path: Path) -> list[str]:
    with open(path, newline="") as handle:  # the file's own lines, read independently of jurymeter
        return handle.read().split("\n")


def _expected(inputs: dict[str, Any], reason: str | None = None, folders: str = "abc") -> list[dict[str, Any]]:
    files = inputs["files"]
    return [{"source": str(files[f]), "line": line, "reason": r, "raw": _lines(files[f])[line - 1]}
            for f, line, r in EXPECTED if (reason is None or r == reason) and f in folders]


def _json(inputs: dict[str, Any], *args: str) -> tuple[list[dict[str, Any]], str]:
    result = runner.invoke(app, ["quarantine", "--store", inputs["store"], "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def _key(row: dict[str, Any]) -> tuple[str, int]:
    return row["source"], row["line"]


def test_every_quarantined_record_with_its_source_line_reason_and_exact_raw(inputs: dict[str, Any]) -> None:
    rows, said = _json(inputs, "--all")
    got = sorted(({k: r[k] for k in ("source", "line", "reason", "raw")} for r in rows), key=_key)
    assert got == sorted(_expected(inputs), key=_key)
    assert all(r["message"] for r in rows)
    assert f"{TOTAL} of {TOTAL} quarantined records shown" in said


def test_the_reason_filter(inputs: dict[str, Any]) -> None:
    for reason in ("wrong_type", "malformed_line", "missing_field", "score_out_of_scale"):
        rows, said = _json(inputs, "--all", "--reason", reason)
        assert sorted((r["source"], r["line"]) for r in rows) == sorted(
            (e["source"], e["line"]) for e in _expected(inputs, reason)), reason
        n = len(_expected(inputs, reason))
        assert f"{n} of {n} quarantined records of reason {reason} shown" in said
    rows, said = _json(inputs, "--reason", "unscored")  # a valid reason with no record
    assert rows == []
    assert "0 of 0" in said


def test_the_source_filter_by_url_file_name_and_relative_path(inputs: dict[str, Any],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    files = inputs["files"]
    by_name, _ = _json(inputs, "--all", "--source", "dump.jsonl")  # both folders' dump.jsonl
    assert sorted(map(_key, by_name)) == sorted(map(_key, _expected(inputs, folders="ab")))
    by_url, _ = _json(inputs, "--all", "--source", str(files["b"]))
    assert sorted(map(_key, by_url)) == sorted(map(_key, _expected(inputs, folders="b")))
    monkeypatch.chdir(inputs["root"])
    relative, _ = _json(inputs, "--all", "--source", "a/dump.jsonl")
    assert sorted(map(_key, relative)) == sorted(map(_key, _expected(inputs, folders="a")))
    both, said = _json(inputs, "--all", "--source", "other.csv", "--reason", "missing_field")
    assert [(r["line"], r["reason"]) for r in both] == [(3, "missing_field")]
    assert "1 of 1 quarantined records of source 'other.csv' and reason missing_field shown" in said


def test_the_limit_takes_the_first_records_by_source_and_line(inputs: dict[str, Any]) -> None:
    every, _ = _json(inputs, "--all")
    first, said = _json(inputs, "--limit", "3")
    assert first == every[:3]
    assert f"3 of {TOTAL} quarantined records shown (--all for every one)" in said
    default, _ = _json(inputs)
    assert default == every[:20]
    # by source URL (a/ before b/ before c/), then line
    assert [(r["source"], r["line"]) for r in every] == sorted((r["source"], r["line"]) for r in every)


def test_csv_is_every_field_exact(inputs: dict[str, Any]) -> None:
    result = runner.invoke(app, ["quarantine", "--store", inputs["store"], "--csv", "--all"])
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    every, _ = _json(inputs, "--all")
    assert len(rows) == TOTAL
    for row, want in zip(rows, every, strict=True):
        assert {**row, "line": int(row["line"])} == {k: ("" if v is None else v) for k, v in want.items()}
    long_raw = next(r["raw"] for r in rows if r["raw"].startswith("not json"))
    assert long_raw == B_LINES[2]  # whole, commas and quotes as written


def _tables(text: str) -> dict[str, list[tuple[int, str]]]:
    """The per-source tables of a printout: source -> its rows' (line, reason)."""
    found: dict[str, list[tuple[int, str]]] = {}
    rows: list[tuple[int, str]] = []
    for line in text.splitlines():
        title = re.match(r"(\S+): \d+ of \d+ (quarantined|matching) records", line)
        if title:
            rows = found.setdefault(title.group(1), [])
        elif line.startswith("│") and (cells := [c.strip() for c in line.split("│")[1:-1]])[0]:
            rows.append((int(cells[0].replace(",", "")), cells[1]))
    return found


def test_the_table_says_how_many_match_and_cuts_long_text(inputs: dict[str, Any]) -> None:
    result = runner.invoke(app, ["quarantine", "--store", inputs["store"]])
    assert result.exit_code == 0, result.output
    text = result.stdout
    a, b = str(inputs["files"]["a"]), str(inputs["files"]["b"])
    assert f"20 of {TOTAL} quarantined records shown" in text
    assert f"{TOTAL - 20} more: --limit N" in text
    assert f"{a}: 20 of 23 quarantined records" in text  # by source URL: a's 23 first
    assert [line for line, _ in _tables(text)[a]] == sorted(line for f, line, _ in EXPECTED if f == "a")[:20]
    narrow = runner.invoke(app, ["quarantine", "--store", inputs["store"], "--source", b])
    assert f"2 of 2 quarantined records of source '{b}' shown" in narrow.stdout
    assert f"{b}: 2 of 2 matching records" in narrow.stdout
    assert _tables(narrow.stdout) == {b: [(2, "wrong_type"), (3, "malformed_line")]}
    assert "more: --limit" not in narrow.stdout
    # B's long line is cut at 60 characters with the rest counted: 229 characters in all
    assert len(B_LINES[2]) == 229
    assert "(+169 characters)" in narrow.stdout
    assert "--csv or --json gives it whole" in narrow.stdout


@pytest.mark.parametrize(("args", "flag"), [
    (["--reason", "wrongtype"], "--reason"),
    (["--limit", "0"], "--limit"),
    (["--limit", "-2"], "--limit"),
    (["--source", "nope.jsonl"], "--source"),
    (["--json", "--csv"], "--json"),
])
def test_a_bad_flag_is_one_line_naming_it(inputs: dict[str, Any], args: list[str], flag: str) -> None:
    result = runner.invoke(app, ["quarantine", "--store", inputs["store"], *args])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    assert flag in lines[0]
    assert "Traceback" not in result.output
    if flag == "--reason":
        for reason in ("malformed_line", "missing_field", "wrong_type", "score_out_of_scale", "parse_failure"):
            assert reason in lines[0]


def test_only_committed_parts_count(inputs: dict[str, Any], tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    shutil.copytree(inputs["store"], store_dir)
    part = next((store_dir / "quarantine").glob("part-*.parquet"))
    # a part of a source whose commit marker was never written (a crashed ingest's leftover)
    shutil.copy(part, store_dir / "quarantine" / "part-0123456789abcdef-00001.parquet")
    rows, _ = _json({**inputs, "store": str(store_dir)}, "--all")
    assert len(rows) == TOTAL
    # a committed source's marker removed: its records are no longer in the store
    marker = next(m for m in (store_dir / "ingested").glob("*.json")
                  if json.loads(m.read_text())["source"] == str(inputs["files"]["c"]))
    marker.unlink()
    rows, _ = _json({**inputs, "store": str(store_dir)}, "--all")
    assert len(rows) == TOTAL - 1


def test_a_reason_filter_opens_no_part_of_a_source_without_that_reason(inputs: dict[str, Any],
                                                                         tmp_path: Path) -> None:
    """other.csv's marker counts missing_field only: asked for wrong_type, its (here unreadable) part is not read."""
    store_dir = tmp_path / "store"
    shutil.copytree(inputs["store"], store_dir)
    marker = next(json.loads(m.read_text()) for m in (store_dir / "ingested").glob("*.json")
                  if json.loads(m.read_text())["source"] == str(inputs["files"]["c"]))
    (part,) = marker["quarantine_parts"]
    (store_dir / part).write_bytes(b"not parquet")
    rows, _ = _json({**inputs, "store": str(store_dir)}, "--all", "--reason", "wrong_type")
    assert len(rows) == len(_expected(inputs, "wrong_type"))


def test_store_info_counts_by_reason_with_the_sources(inputs: dict[str, Any]) -> None:
    result = runner.invoke(app, ["store", "info", "--store", inputs["store"]])
    assert result.exit_code == 0, result.output
    text = result.stdout
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in text.splitlines() if line.startswith("│") and "_" in line.split("│")[1]}
    a, b = str(inputs["files"]["a"]), str(inputs["files"]["b"])
    assert rows["wrong_type"] == ["21", f"{a} (20), {b} (1)"]
    assert rows["malformed_line"] == ["2", f"{a} (1), {b} (1)"]
    assert rows["missing_field"] == ["2", f"{a} (1), other.csv (1)"]
    assert rows["score_out_of_scale"] == ["1", f"{a} (1)"]
    assert f"quarantine: {TOTAL} records" in text
    assert f"jurymeter quarantine --store {inputs['store']} --reason R" in text
    payload = json.loads(runner.invoke(app, ["store", "info", "--store", inputs["store"], "--json"]).stdout)
    assert payload["quarantine"] == {"malformed_line": 2, "missing_field": 2, "score_out_of_scale": 1,
                                     "wrong_type": 21}
    assert payload["quarantine_sources"]["wrong_type"] == {a: 20, b: 1}


def test_ingest_shows_the_first_records_of_each_source_and_how_to_see_the_rest(inputs: dict[str, Any]) -> None:
    text = inputs["ingest"].stdout
    assert "first quarantined records (up to 5 per source):" in text
    a, b, c = (str(inputs["files"][k]) for k in "abc")
    tables = _tables(text.split("first quarantined records")[1])
    # each source's first five by line
    assert tables[a] == [(2, "wrong_type"), (4, "malformed_line"), (5, "missing_field"),
                         (6, "score_out_of_scale"), (8, "wrong_type")]
    assert tables[b] == [(2, "wrong_type"), (3, "malformed_line")]
    assert tables[c] == [(3, "missing_field")]
    assert f"{a}: 5 of 23 quarantined records" in text
    assert f"{b}: 2 of 2 quarantined records" in text
    assert f"the rest of {a}: jurymeter quarantine --store {inputs['store']} --source {a}" in text
    assert f"the rest of {b}" not in text  # b's two are all shown
    rest, _ = _json(inputs, "--all", "--source", a)  # what the hint's command lists
    assert len(rest) == 23


def test_a_reingest_shows_nothing_new_and_an_empty_quarantine_says_so(inputs: dict[str, Any],
                                                                       tmp_path: Path) -> None:
    again = runner.invoke(app, ["ingest", str(inputs["files"]["a"]), "--store", inputs["store"]])
    assert again.exit_code == 0, again.output
    assert "first quarantined records" not in again.stdout
    clean = tmp_path / "clean.jsonl"
    clean.write_text(good(1) + "\n")
    store = str(tmp_path / "store")
    assert runner.invoke(app, ["ingest", str(clean), "--store", store]).exit_code == 0
    empty = runner.invoke(app, ["quarantine", "--store", store])
    assert empty.exit_code == 0
    assert "no record (the quarantine is empty)" in empty.stdout
    clean_source = runner.invoke(app, ["quarantine", "--store", store, "--source", "clean.jsonl"])
    assert clean_source.exit_code == 0  # a source the store holds, with nothing quarantined
    assert "no record of source 'clean.jsonl'" in clean_source.stdout
    assert "quarantine: empty" in runner.invoke(app, ["store", "info", "--store", store]).stdout
    missing = runner.invoke(app, ["quarantine", "--store", str(tmp_path / "nostore")])
    assert missing.exit_code == 1
    assert missing.stderr.startswith("error: ")


def test_the_store_comes_from_the_config_file_too(inputs: dict[str, Any], tmp_path: Path) -> None:
    config = tmp_path / "jm.toml"
    config.write_text(f'store = "{inputs["store"]}"\n')
    result = runner.invoke(app, ["quarantine", "--config", str(config), "--json", "--reason", "score_out_of_scale"])
    assert result.exit_code == 0, result.output
    assert [r["line"] for r in json.loads(result.stdout)] == [6]


def test_a_failed_read_back_is_a_note_and_the_ingest_still_succeeds(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import jurymeter.io.quarantine as quarantine

    def broken(*_: Any, **__: Any) -> None:
        raise OSError("the store went away\nsecond line")

    monkeypatch.setattr(quarantine, "first_quarantined", broken)
    source = tmp_path / "x.jsonl"
    source.write_text("\n".join([good(1), wrong_type(2)]) + "\n")
    result = runner.invoke(app, ["ingest", str(source), "--store", str(tmp_path / "store")])
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == ("note: the quarantined records could not be read back (OSError: the store "
                                     "went away); jurymeter quarantine lists them")
    assert "first quarantined records" not in result.stdout


def test_an_s3_store_lists_the_same_records(inputs: dict[str, Any], moto_s3: Any) -> None:
    store = f"s3://{moto_s3.bucket}/quarantine-store"
    files = [str(f) for f in inputs["files"].values()]
    ingested = runner.invoke(app, ["ingest", *files, "--store", store, "--scale", "1,10"])
    assert ingested.exit_code == 0, ingested.output
    assert f"the rest of {inputs['files']['a']}: jurymeter quarantine --store {store} --source" in ingested.stdout
    s3_rows, _ = _json({**inputs, "store": store}, "--all")
    local_rows, _ = _json(inputs, "--all")
    assert s3_rows == local_rows
    wrong, said = _json({**inputs, "store": store}, "--reason", "wrong_type", "--source", "dump.jsonl", "--limit", "4")
    assert [(r["source"], r["line"]) for r in wrong] == [(files[0], 2), (files[0], 8), (files[0], 9), (files[0], 10)]
    assert "4 of 21 quarantined records of source 'dump.jsonl' and reason wrong_type shown" in said
