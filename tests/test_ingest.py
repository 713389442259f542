"""Ingest: every quarantine reason, duplicates, formats, options and exit codes.

Each test checks the reconciliation identity twice (``ingest_util.run_ingest``):
the report balances, and the committed files hold exactly the reported counts.
"""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import orjson
import polars as pl
import pytest
import zstandard
from typer.testing import CliRunner

from ingest_util import pointwise_records, run_ingest, write_jsonl
from jurymeter.cli import app
from jurymeter.errors import SourceError, StoreError, StrictModeError
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store

GOOD = {"item_set": "chat", "item_id": "q1", "system_id": "s1", "judge_id": "j1", "score": 7}


def _bad(**change) -> dict:
    record = {**GOOD, **change}
    return {k: v for k, v in record.items() if v is not ...}


def _quarantine(store: Store) -> pl.DataFrame:
    return pl.concat([store.read_parquet(p) for p in store.quarantine_files()]).sort("line")


POINTWISE_CASES = [
    ("malformed_line", "{not json"),
    ("malformed_line", "[1, 2, 3]"),
    ("missing_field", _bad(judge_id=...)),
    ("missing_field", _bad(item_id="")),
    ("wrong_type", _bad(score="high")),
    ("wrong_type", _bad(score=True)),
    ("wrong_type", _bad(generation=1.5)),
    ("wrong_type", _bad(system_id={"name": "x"})),
    ("wrong_type", _bad(timestamp="yesterday")),
    ("out_of_range", _bad(replicate=-1)),
    ("non_finite_score", '{"item_set":"chat","item_id":"q9","system_id":"s1","judge_id":"j1","score":NaN}'),
    ("score_out_of_scale", _bad(score=11)),
    ("score_out_of_scale", _bad(score=0.5)),
    ("invalid_text", '{"item_set":"chat","item_id":"q\\ud800","system_id":"s1","judge_id":"j1","score":7}'),
]


@pytest.mark.parametrize(("reason", "record"), POINTWISE_CASES)
def test_each_pointwise_reason_quarantines_the_record_with_file_line_and_raw(
    tmp_path: Path, reason: str, record: dict | str
) -> None:
    source = write_jsonl(tmp_path / "dump.jsonl", [GOOD, _bad(item_id="q2"), record])
    store = Store(str(tmp_path / "store"))
    report = run_ingest(store, source, scale=(1.0, 10.0))
    (result,) = report.sources
    assert (result.read, result.accepted, result.quarantined) == (3, 2, 1)
    assert result.reasons == {reason: 1}
    q = _quarantine(store)
    assert q["reason"].to_list() == [reason]
    assert q["line"].to_list() == [3]
    assert q["source"].to_list() == [str(source)]
    raw = record if isinstance(record, str) else orjson.dumps(record).decode()
    assert q["raw"].to_list() == [raw]
    assert q["message"][0]


PAIR = {
    "item_set": "arena",
    "item_id": "q1",
    "system_a": "s1",
    "system_b": "s2",
    "judge_id": "j1",
    "winner": "A",
}

PAIRWISE_CASES = [
    ("unknown_winner", {**PAIR, "winner": "C"}),
    ("preference_out_of_range", {**{k: v for k, v in PAIR.items() if k != "winner"}, "preference": 1.7}),
    ("preference_out_of_range", {**{k: v for k, v in PAIR.items() if k != "winner"}, "preference": -0.1}),
    ("same_system", {**PAIR, "system_b": "s1"}),
    ("missing_field", {k: v for k, v in PAIR.items() if k != "winner"}),
    ("missing_field", {k: v for k, v in PAIR.items() if k != "system_a"}),
]


@pytest.mark.parametrize(("reason", "record"), PAIRWISE_CASES)
def test_each_pairwise_reason(tmp_path: Path, reason: str, record: dict) -> None:
    ok = [PAIR, {**PAIR, "item_id": "q2", "winner": "tie"}, {**PAIR, "item_id": "q3", "winner": None, "preference": 0.25}]
    source = write_jsonl(tmp_path / "pairs.jsonl", [*ok, {**record, "item_id": "bad"}])
    store = Store(str(tmp_path / "store"))
    (result,) = run_ingest(store, source).sources
    assert result.protocol == "pairwise"
    assert result.reasons == {reason: 1}
    assert result.accepted == 3
    stored = store.scan("pairwise", "arena").collect().sort("item_id")
    assert stored["winner"].to_list() == ["A", "tie", None]
    assert stored["preference"].to_list() == [None, None, 0.25]


def test_winner_aliases_are_normalised(tmp_path: Path) -> None:
    spellings = ["a", "model_b", "Tie", "tie (bothbad)", " B "]
    records = [{**PAIR, "item_id": f"q{k}", "winner": w} for k, w in enumerate(spellings)]
    store = Store(str(tmp_path / "store"))
    run_ingest(store, write_jsonl(tmp_path / "p.jsonl", records))
    got = store.scan("pairwise", "arena").collect().sort("item_id")["winner"].to_list()
    assert got == ["A", "B", "tie", "tie", "B"]


def test_conflicting_duplicates_in_one_file_both_go_to_quarantine(tmp_path: Path) -> None:
    records = [GOOD, _bad(item_id="q2"), _bad(score=3), _bad(item_id="q3")]
    store = Store(str(tmp_path / "store"))
    (result,) = run_ingest(store, write_jsonl(tmp_path / "d.jsonl", records)).sources
    assert result.reasons == {"conflicting_duplicate": 2}
    assert result.accepted == 2
    q = _quarantine(store)
    assert q["line"].to_list() == [1, 3]
    assert "line(s) 3" in q["message"][0]
    assert sorted(store.scan("pointwise").collect()["item_id"].to_list()) == ["q2", "q3"]


def test_conflicts_far_apart_quote_their_lines_as_written_across_read_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Conflicting lines on both sides of read-block edges (blocks of 1 KiB here), after a BOM and with
    CRLF endings: each quarantined record's raw text is its line as Python's own line iteration gives it."""
    import jurymeter.io.adapters.reading as reading

    monkeypatch.setattr(reading, "READ_BYTES", 1024)
    records = [orjson.dumps(r).decode() for r in pointwise_records(300)]
    conflicting = [7, 150, 151, 299]  # 0-based records whose copy, with another score, is appended
    for k in conflicting:
        records.append(orjson.dumps({**orjson.loads(records[k]), "score": 0.5}).decode())
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(records).encode() + b"\r\n")
    store = Store(str(tmp_path / "store"))
    (result,) = run_ingest(store, path).sources
    assert result.reasons == {"conflicting_duplicate": 2 * len(conflicting)}
    with open(path, "rb") as handle:
        as_read = [raw.rstrip(b"\r\n").removeprefix(b"\xef\xbb\xbf").decode() for raw in handle]
    q = _quarantine(store)
    assert len(q) == 2 * len(conflicting)
    for line, raw in q.select("line", "raw").iter_rows():
        assert raw == as_read[line - 1], line


def test_exact_duplicates_are_dropped_and_counted_within_and_across_files(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    first = write_jsonl(tmp_path / "a.jsonl", [GOOD, GOOD, _bad(item_id="q2"), GOOD])
    (r1,) = run_ingest(store, first).sources
    assert (r1.read, r1.accepted, r1.duplicates_dropped) == (4, 2, 2)
    stored = store.scan("pointwise").collect()
    assert stored.filter(pl.col("item_id") == "q1").height == 1
    # A re-delivery under another name, plus one new record and one conflict.
    second = write_jsonl(tmp_path / "b.jsonl", [_bad(item_id="q2"), _bad(item_id="q4"), _bad(score=9)])
    (r2,) = run_ingest(store, second).sources
    assert (r2.read, r2.accepted, r2.duplicates_dropped, r2.quarantined) == (3, 1, 1, 1)
    assert r2.reasons == {"conflicting_duplicate": 1}
    assert str(first) in _quarantine(store)["message"][0]
    assert store.scan("pointwise").collect().height == 3


def test_reingesting_the_same_content_is_a_no_op_that_says_so(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    source = write_jsonl(tmp_path / "a.jsonl", pointwise_records(50))
    run_ingest(store, source)
    before = sorted(p.name for p in (tmp_path / "store").rglob("*.parquet"))
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(source.read_bytes())
    report = run_ingest(store, source, copy)
    assert [s.status for s in report.sources] == ["already_ingested", "already_ingested"]
    assert all(s.read == 0 for s in report.sources)
    assert "already in the store" in report.sources[1].note
    assert sorted(p.name for p in (tmp_path / "store").rglob("*.parquet")) == before
    assert store.scan("pointwise").collect().height == 50


def _csv_text(records: list[dict]) -> str:
    frame = pl.DataFrame(records)
    buffer = io.StringIO()
    frame.write_csv(buffer)
    return buffer.getvalue()


def test_all_formats_give_the_same_store(tmp_path: Path) -> None:
    records = pointwise_records(300)
    text = write_jsonl(tmp_path / "x.jsonl", records).read_bytes()
    variants = {
        "x.jsonl.gz": gzip.compress(text),
        "x.jsonl.zst": zstandard.ZstdCompressor().compress(text),
        "x.csv": _csv_text(records).encode(),
        "x.csv.gz": gzip.compress(_csv_text(records).encode()),
    }
    expected = None
    for name, payload in [("x.jsonl", text), *variants.items()]:
        path = tmp_path / "one" / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(payload)
        store = Store(str(tmp_path / f"store-{name}"))
        (result,) = run_ingest(store, path).sources
        assert (result.accepted, result.quarantined) == (300, 0), name
        frame = store.scan("pointwise").collect().sort("item_id", "system_id", "judge_id")
        if expected is None:
            expected = frame
        assert frame.equals(expected), name
    parquet = tmp_path / "one" / "x.parquet"
    pl.DataFrame(records).write_parquet(parquet)
    store = Store(str(tmp_path / "store-parquet"))
    run_ingest(store, parquet)
    frame = store.scan("pointwise").collect().sort("item_id", "system_id", "judge_id")
    assert frame.equals(expected)


def test_csv_wrong_arity_is_malformed(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("item_set,item_id,system_id,judge_id,score\nchat,q1,s1,j1,5\nchat,q2,s1,j1\nchat,q3,s1,j1,5,9\n")
    store = Store(str(tmp_path / "store"))
    (result,) = run_ingest(store, path).sources
    assert result.reasons == {"malformed_line": 2}
    assert _quarantine(store)["line"].to_list() == [3, 4]


def test_map_item_set_and_unknown_columns(tmp_path: Path) -> None:
    records = [
        {"question_id": 81, "model": "gpt-x", "judge": "j1", "rating": 8, "turn": 1},
        {"question_id": 82, "model": "gpt-x", "judge": "j1", "rating": 3, "turn": 2, "note": {"k": [1]}},
    ]
    store = Store(str(tmp_path / "store"))
    (result,) = run_ingest(
        store,
        write_jsonl(tmp_path / "mt.jsonl", records),
        column_map={"score": "rating", "item_id": "question_id", "system_id": "model", "judge_id": "judge"},
        item_set="mt-bench",
    ).sources
    assert (result.protocol, result.accepted) == ("pointwise", 2)
    frame = store.scan("pointwise", "mt-bench", columns=["item_set", "item_id", "score", "turn", "note"]).collect().sort("item_id")
    assert frame["item_id"].to_list() == ["81", "82"]
    assert frame["item_set"].to_list() == ["mt-bench", "mt-bench"]
    assert frame["turn"].to_list() == ["1", "2"]
    assert frame["note"].to_list() == [None, '{"k":[1]}']


def test_metadata_tables_are_ingested_the_same_way(tmp_path: Path) -> None:
    systems = [{"system_id": "s1", "model": "m", "config": "t=0", "family": "f1"}, {"system_id": "s2", "model": "m", "config": "t=1", "family": "f1"}, {"system_id": "s1", "model": "m", "config": "t=0", "family": "f1"}]
    judges = [{"judge_id": "j1", "family": "f1", "vendor": "v", "tier": "frontier"}, {"judge_id": "", "family": "f1"}]
    store = Store(str(tmp_path / "store"))
    report = run_ingest(store, write_jsonl(tmp_path / "systems.jsonl", systems), write_jsonl(tmp_path / "judges.jsonl", judges))
    s, j = report.sources
    assert (s.protocol, s.accepted, s.duplicates_dropped) == ("systems", 2, 1)
    assert (j.protocol, j.accepted, j.reasons) == ("judges", 1, {"missing_field": 1})
    assert store.scan("systems").collect()["system_id"].sort().to_list() == ["s1", "s2"]


def test_unknown_protocol_quarantines_every_record(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    (result,) = run_ingest(store, write_jsonl(tmp_path / "x.jsonl", [{"a": 1}, {"a": 2}])).sources
    assert result.reasons == {"unknown_protocol": 2}


def test_item_set_names_are_stored_safely_and_read_back(tmp_path: Path) -> None:
    names = ["../../etc", "MT-Bench", "mt-bench", "a/b", "ünï cödé", "%2E%2E", "x" * 240, "É" * 40]
    # Names too long for a folder of their own were quarantined once; now they get a digested one.
    names += ["x" * 241, "É" * 41, "../" * 100, "~" * 100]
    records = [{**GOOD, "item_set": n} for n in names]
    store = Store(str(tmp_path / "store"))
    run_ingest(store, write_jsonl(tmp_path / "x.jsonl", records))
    assert sorted(store.item_sets("pointwise")) == sorted(names)
    for path in (tmp_path / "store").rglob("*"):
        assert path.resolve().is_relative_to((tmp_path / "store").resolve())
        assert len(path.name.encode()) <= 255
    assert not (tmp_path / "etc").exists()


def test_many_small_batches_give_the_same_result_as_one(tmp_path: Path) -> None:
    records = pointwise_records(2000)
    records[500] = {**records[500], "score": "bad"}
    records[1500] = records[10]  # exact duplicate in another batch
    source = write_jsonl(tmp_path / "x.jsonl", records)
    one, many = Store(str(tmp_path / "one")), Store(str(tmp_path / "many"))
    r1 = run_ingest(one, source)
    r2 = run_ingest(many, source, block_bytes=4096)
    assert len(list((tmp_path / "many").rglob("part-*.parquet"))) > 10
    a, b = r1.sources[0], r2.sources[0]
    assert (a.accepted, a.quarantined, a.duplicates_dropped) == (b.accepted, b.quarantined, b.duplicates_dropped) == (1998, 1, 1)
    cols = ["item_id", "system_id", "judge_id"]
    assert one.scan("pointwise").collect().sort(cols).equals(many.scan("pointwise").collect().sort(cols))


def test_strict_fails_and_commits_nothing_of_that_source(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    source = write_jsonl(tmp_path / "x.jsonl", [GOOD, _bad(score="x")])
    with pytest.raises(StrictModeError, match="1 record"):
        run_ingest(store, source, strict=True)
    assert store.scan("pointwise").collect().height == 0
    assert store.quarantine_files() == []


def test_missing_source_is_fatal(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="source not found"):
        discover_sources([str(tmp_path / "nope.jsonl")])


def test_unreadable_store_is_fatal(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "jurymeter-store.json").write_text("{broken")
    with pytest.raises(StoreError, match="cannot read store"):
        Store(str(tmp_path / "store")).check()


runner = CliRunner()


def test_cli_exit_codes_and_one_line_errors(tmp_path: Path) -> None:
    result = runner.invoke(app, ["ingest", str(tmp_path / "missing.jsonl"), "--store", str(tmp_path / "s")])
    assert result.exit_code == 1
    assert result.output.strip().startswith("error: source not found")
    assert "Traceback" not in result.output
    source = write_jsonl(tmp_path / "x.jsonl", [GOOD, _bad(score="x")])
    ok = runner.invoke(app, ["ingest", str(source), "--store", str(tmp_path / "s"), "--json"])
    assert ok.exit_code == 0, ok.output
    manifest = orjson.loads(ok.stdout)
    assert manifest["totals"] == {"read": 2, "accepted": 1, "quarantined": 1, "duplicates_dropped": 0}
    strict_source = write_jsonl(tmp_path / "y.jsonl", [_bad(item_id="z", score="x")])
    strict = runner.invoke(app, ["ingest", str(strict_source), "--store", str(tmp_path / "s"), "--strict"])
    assert strict.exit_code == 3
    info = runner.invoke(app, ["store", "info", "--store", str(tmp_path / "s"), "--json"])
    assert info.exit_code == 0, info.output
    payload = orjson.loads(info.stdout)
    assert payload["item_sets"][0]["records"] == 1
    assert payload["quarantine"] == {"wrong_type": 1}
    missing = runner.invoke(app, ["store", "info", "--store", str(tmp_path / "nostore")])
    assert missing.exit_code == 1
    assert "no jurymeter store" in missing.output


def test_run_manifest_is_kept_in_the_store(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    report = run_ingest(store, write_jsonl(tmp_path / "x.jsonl", [GOOD, "oops"]))
    manifest = store.read_json(f"runs/{report.run_id}.json")
    assert manifest["status"] == "complete"
    (source,) = manifest["sources"]
    assert (source["read"], source["accepted"], source["quarantined"]) == (2, 1, 1)


def test_duplicate_resolution_in_hash_buckets_matches_one_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import jurymeter.io.duplicates as duplicates_module

    records: list[dict | str] = list(pointwise_records(400))
    records += [records[k] for k in range(0, 400, 7)]  # exact re-deliveries
    records += [{**records[k], "score": 99.0 if k % 2 else 0.5} for k in range(3, 400, 11)]
    source = write_jsonl(tmp_path / "x.jsonl", records)
    redelivery = write_jsonl(tmp_path / "y.jsonl", [*records[:200], _bad(item_id="new")])
    results = []
    for per_pass in (1_000_000, 3):
        monkeypatch.setattr(duplicates_module, "CANDIDATES_PER_PASS", per_pass)
        store = Store(str(tmp_path / f"store-{per_pass}"))
        report = run_ingest(store, source, redelivery)
        results.append(([(s.accepted, s.quarantined, s.duplicates_dropped) for s in report.sources], store))
    (counts_one, store_one), (counts_many, store_many) = results
    assert counts_one == counts_many
    # 37 conflicting copies + their 37 originals + the 6 exact copies of those
    # originals (k = 3 mod 11 and 0 mod 7) are quarantined; 58 - 6 copies dropped.
    assert counts_one[0] == (400 + 58 + 37 - 80 - 52, 80, 52)
    cols = ["item_id", "system_id", "judge_id"]
    assert store_one.scan("pointwise").collect().sort(cols).equals(store_many.scan("pointwise").collect().sort(cols))


def test_blank_lines_and_a_missing_final_newline_keep_line_numbers(tmp_path: Path) -> None:
    lines = [orjson.dumps(r).decode() for r in pointwise_records(6)]
    lines[3] = '{"item_set":"chat","item_id":"x","system_id":"s","judge_id":"j","score":"bad"}'
    text = lines[0] + "\n\n" + lines[1] + "\n   \n" + "\n".join(lines[2:])  # no final newline
    path = tmp_path / "x.jsonl"
    path.write_text(text)
    store = Store(str(tmp_path / "store"))
    (result,) = run_ingest(store, path, block_bytes=1 << 20).sources
    assert (result.read, result.accepted, result.quarantined) == (6, 5, 1)
    q = _quarantine(store)
    assert q["line"].to_list() == [6]
    assert q["raw"].to_list() == [lines[3]]
    stored = store.scan("pointwise", columns=["item_id", "_source_line"]).collect().sort("_source_line")
    assert stored["_source_line"].to_list() == [1, 3, 5, 7, 8]
    # One block, one part: the unterminated last line joined it.
    assert len(list((tmp_path / "store" / "data").rglob("part-*.parquet"))) == 1
