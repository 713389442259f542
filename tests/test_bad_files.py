"""One bad file never stops the rest: discovery's edges, a source cut mid-stream, a full disk, S3 failures.

Independent references: the bad files are made by hand (``os.symlink``,
``os.mkfifo``, a Unix socket, ``/dev/null``, a name of raw bytes, ``gzip``
of the standard library cut in half), each with the reason it must be
reported for written out here; what the store holds afterwards is compared
with a clean ingest of the good files alone (``assert_same_store``), and the
judgments of a source are counted from the committed files (``assert_reconciled``).
"""

from __future__ import annotations

import errno
import gzip
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import blake3
import orjson
import polars as pl
import pytest

from ingest_util import (
    assert_reconciled,
    assert_same_store,
    pointwise_records,
    run_ingest,
    write_jsonl,
)
from jurymeter.errors import StoreError
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions

BAD_NAME = b"bad-\xff-name.jsonl"  # not UTF-8: os.fsdecode makes it a surrogate escape


def _good(folder: Path) -> list[Path]:
    return [
        write_jsonl(folder / "a-good.jsonl", list(pointwise_records(240, item_set="set-a"))),
        write_jsonl(folder / "z-good.jsonl", list(pointwise_records(120, item_set="set-z", seed=3))),
    ]


@pytest.fixture
def hostile_folder(tmp_path: Path) -> Iterator[tuple[Path, list[Path], dict[str, str]]]:
    """A folder of two good dumps and one file of each bad kind; the reason each must be reported for."""
    folder = tmp_path / "landing"
    folder.mkdir()
    good = _good(folder)
    os.symlink(folder / "gone.jsonl", folder / "dangling.jsonl")
    os.mkfifo(folder / "fifo.jsonl")
    os.symlink("/dev/null", folder / "device.jsonl")
    os.symlink(folder / "loop.jsonl", folder / "loop.jsonl")  # stat fails with ELOOP: unreadable
    (folder / "not-gzip.jsonl.gz").write_bytes(b"these bytes are not gzip\n")
    with open(os.path.join(os.fsencode(folder), BAD_NAME), "wb") as handle:
        handle.write(orjson.dumps(pointwise_records(1)[0]) + b"\n")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "socket.jsonl"))
    reasons = {
        "dangling.jsonl": "dangling symbolic link",
        "fifo.jsonl": "not a regular file: a FIFO",
        "device.jsonl": "not a regular file: a character device",
        "loop.jsonl": "Too many levels of symbolic links",
        "not-gzip.jsonl.gz": "not gzip data, or corrupt",
        "bad-\\xff-name.jsonl": "file name is not UTF-8",
        "socket.jsonl": "not a regular file: a socket",
    }
    try:
        yield folder, good, reasons
    finally:
        sock.close()


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jurymeter.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "COLUMNS": "200"})


def test_a_folder_of_bad_files_is_one_line_each_in_bounded_time_and_the_rest_is_ingested(
    tmp_path: Path, hostile_folder: tuple[Path, list[Path], dict[str, str]]
) -> None:
    folder, good, reasons = hostile_folder
    # A FIFO opened for reading waits for a writer forever: the timeout is the bound.
    done = _cli("ingest", str(folder), "--store", str(tmp_path / "store"), timeout=60)
    assert done.returncode == 6, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == len(reasons), done.stderr
    for name, reason in reasons.items():
        [line] = [line for line in lines if f"{folder}/{name}: " in line]
        assert reason in line, line
    assert "\udcff" not in done.stdout + done.stderr  # the name is escaped, never a surrogate
    reference = Store(str(tmp_path / "reference"))
    run_ingest(reference, *good)
    assert_same_store(Store(str(tmp_path / "store")), reference)

    # The run's manifest keeps each one, with read 0 (reconciliation holds) and its reason.
    [manifest] = [orjson.loads(p.read_bytes()) for p in (tmp_path / "store" / "runs").glob("*.json")]
    assert manifest["status"] == "complete"
    unreadable = {u["source"].rsplit("/", 1)[-1]: u["reason"] for u in manifest["sources_unreadable"]}
    assert set(unreadable) == set(reasons)
    statuses = {s["source"].rsplit("/", 1)[-1]: (s["status"], s["read"]) for s in manifest["sources"]}
    assert statuses == {**{n: ("unreadable", 0) for n in reasons}, "a-good.jsonl": ("ingested", 240),
                        "z-good.jsonl": ("ingested", 120)}

    # Again: the good files are no-ops, the bad ones said again.
    again = _cli("ingest", str(folder), "--store", str(tmp_path / "store"), timeout=60)
    assert again.returncode == 6
    assert_same_store(Store(str(tmp_path / "store")), reference)


def test_a_dangling_link_named_alone_is_unreadable_not_missing(tmp_path: Path) -> None:
    os.symlink(tmp_path / "nowhere.jsonl", tmp_path / "link.jsonl")
    [source] = discover_sources([str(tmp_path / "link.jsonl")])
    assert source.unreadable is not None
    assert source.unreadable.startswith("dangling symbolic link")
    with pytest.raises(Exception, match="source not found"):
        discover_sources([str(tmp_path / "nowhere.jsonl")])


def test_a_file_without_read_permission_is_unreadable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Root reads everything: the permission check (an open, never a read) is made to fail.
    good = _good(tmp_path)
    real_open = os.open

    def denied(path: str, flags: int, *args: int) -> int:
        if str(path).endswith("z-good.jsonl"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)
        return real_open(path, flags, *args)

    monkeypatch.setattr("jurymeter.io.sources.os.open", denied)
    found = discover_sources([str(tmp_path)])
    assert [(s.url.rsplit("/", 1)[-1], s.unreadable) for s in found] == [
        ("a-good.jsonl", None), ("z-good.jsonl", "cannot read: Permission denied")
    ]
    store = Store(str(tmp_path / "store"))
    report = ingest(store, found, ValidationOptions())
    assert_reconciled(store, report)
    assert [(s.status, s.read) for s in report.sources] == [("ingested", 240), ("unreadable", 0)]
    assert store.scan("pointwise").collect().height == 240
    assert good


def _cut_gzip(path: Path, records: int) -> Path:
    whole = "".join(orjson.dumps(r).decode() + "\n" for r in pointwise_records(records, item_set="set-cut", seed=5))
    data = gzip.compress(whole.encode())
    path.write_bytes(data[: len(data) // 2])
    return path


def test_a_source_whose_read_fails_mid_stream_leaves_nothing_of_it_and_the_next_source_is_ingested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cut stream keeps its complete records (tests/test_hostile_ingest.py); a read that fails
    # part way for any other cause (a reset connection, an I/O error) is this file's failure.
    import jurymeter.io.ingest as ingest_module

    first, last = _good(tmp_path)
    cut = _cut_gzip(tmp_path / "m-cut.jsonl.gz", 60_000)
    real_read = ingest_module.read_batches

    def failing(source, **kwargs):  # type: ignore[no-untyped-def]
        for k, batch in enumerate(real_read(source, **kwargs)):
            if source.url == str(cut) and k == 2:
                raise OSError(errno.ECONNRESET, "Connection reset by peer")
            yield batch

    monkeypatch.setattr(ingest_module, "read_batches", failing)
    written: list[str] = []
    real_write = Store.write_parquet

    def spy(self: Store, relpath: str, frame: pl.DataFrame) -> None:
        written.append(relpath)
        real_write(self, relpath, frame)

    monkeypatch.setattr(Store, "write_parquet", spy)
    store = Store(str(tmp_path / "store"))
    found = discover_sources([str(first), str(cut), str(last)])
    assert [s.unreadable for s in found] == [None, None, None]  # its head decodes: the cut is found reading
    report = ingest(store, found, ValidationOptions(), block_bytes=256 * 1024)
    assert_reconciled(store, report)
    assert [s.status for s in report.sources] == ["ingested", "unreadable", "ingested"]
    bad = report.sources[1]
    assert bad.read == bad.accepted == bad.quarantined == 0
    assert "Connection reset by peer" in bad.note, bad.note
    assert str(cut) not in bad.note  # the report names the file once
    # It had staged parts before the cut was met (its parts carry its source id); none of them is left.
    sid = Store.source_id(blake3.blake3(cut.read_bytes()).hexdigest())
    mine = {p.rsplit("/", 1)[-1] for p in written if f"part-{sid}-" in p}
    assert mine, "the cut source wrote parts before its read failed"
    assert not [p for p in (tmp_path / "store").rglob("part-*.parquet") if p.name in mine]
    reference = Store(str(tmp_path / "reference"))
    run_ingest(reference, first, last)
    assert_same_store(store, reference)
    assert report.unreadable() == [{"source": str(cut), "reason": bad.note}]


@pytest.mark.parametrize("where", ["data part", "commit marker"])
def test_a_full_disk_is_one_line_naming_the_store_and_the_write_and_the_store_is_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    first, plain = _good(tmp_path)
    last = tmp_path / "z-good.jsonl.gz"  # the block path: its parts are written one by one
    last.write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    store_dir = tmp_path / "store"
    run_ingest(Store(str(store_dir)), first)
    before = {p.relative_to(store_dir) for p in store_dir.rglob("*") if p.is_file() and "runs" not in p.parts}
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    if where == "data part":
        real = pl.DataFrame.write_parquet

        def write_parquet(frame: pl.DataFrame, target: object, *args: object, **kwargs: object) -> None:
            if isinstance(target, str) and "/data/" in target:
                Path(target).write_bytes(b"PAR1 half")  # what a write cut by a full disk leaves
                raise full
            real(frame, target, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(pl.DataFrame, "write_parquet", write_parquet)
    else:
        real_replace = os.replace

        def replace(src: str, dst: str) -> None:
            if "/ingested/" in str(dst):
                raise full
            real_replace(src, dst)

        monkeypatch.setattr("jurymeter.io.store.os.replace", replace)
    with pytest.raises(StoreError) as info:
        ingest(Store(str(store_dir)), discover_sources([str(last)]), ValidationOptions())
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"cannot write {store_dir}/")
    assert "No space left on device" in message
    monkeypatch.undo()
    after = {p.relative_to(store_dir) for p in store_dir.rglob("*") if p.is_file() and "runs" not in p.parts}
    assert not any(".tmp-" in str(p) for p in after)  # a failed atomic write leaves no temporary file
    reference = Store(str(tmp_path / "reference"))
    run_ingest(reference, first)
    assert_same_store(Store(str(store_dir)), reference)  # what a reader sees: as before
    assert set(Store(str(store_dir)).committed()) == set(reference.committed())
    assert not [p for p in after - before if (store_dir / p).read_bytes() == b"PAR1 half"]  # a cut part is removed
    # The rerun equals one clean ingest of both.
    run_ingest(Store(str(store_dir)), first, last)
    run_ingest(reference, last)
    assert_same_store(Store(str(store_dir)), reference)


def test_the_cli_says_a_full_disk_in_one_line(tmp_path: Path) -> None:
    # A real full file system is a tmpfs of a few kilobytes: root may mount one, else this is skipped.
    mount = tmp_path / "small"
    mount.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True)
    if made.returncode:
        pytest.skip("cannot mount a small tmpfs here")
    try:
        # Random ids: no compression squeezes them under the file system's size.
        records = [{**r, "item_id": os.urandom(24).hex()} for r in pointwise_records(20_000, item_set="big")]
        source = write_jsonl(tmp_path / "big.jsonl", list(records))
        done = _cli("ingest", str(source), "--store", str(mount / "store"))
        assert done.returncode == 1, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        [line] = done.stderr.strip().splitlines()
        assert line.startswith(f"error: cannot write {mount}/store/")
        assert "No space left on device" in line
        assert Store(str(mount / "store")).scan("pointwise").collect().height == 0
    finally:
        subprocess.run(["umount", str(mount)], check=False)


class FailingReads:
    """An fsspec file system on which reading a commit marker fails (the link drops mid-ingest)."""

    def __init__(self, fs: object) -> None:
        self._fs = fs

    def cat_file(self, path: str, *args: object, **kwargs: object) -> bytes:
        if "/ingested/" in path:
            from botocore.exceptions import EndpointConnectionError

            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9/" + path)
        return self._fs.cat_file(path, *args, **kwargs)  # type: ignore[attr-defined, no-any-return]

    def __getattr__(self, name: str) -> object:
        return getattr(self._fs, name)


def test_an_s3_failure_mid_ingest_is_one_store_error_and_a_rerun_equals_a_clean_ingest(
    moto_s3: object, tmp_path: Path
) -> None:
    first, last = _good(tmp_path)
    url = f"s3://{moto_s3.bucket}/store"  # type: ignore[attr-defined]
    broken = Store(url)
    broken.fs = FailingReads(broken.fs)
    with pytest.raises(StoreError) as info:
        ingest(broken, discover_sources([str(first), str(last)]), ValidationOptions())
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"cannot read {url}/ingested/"), message
    assert Store(url).scan("pointwise").collect().height == 0
    run_ingest(Store(url), first, last)
    reference = Store(str(tmp_path / "reference"))
    run_ingest(reference, first, last)
    assert_same_store(Store(url), reference)


def test_the_landing_ingest_reports_every_unreadable_file_and_the_run_alerts_each(
    tmp_path: Path, hostile_folder: tuple[Path, list[Path], dict[str, str]]
) -> None:
    """The run's path without Prefect: the landing ingest, then publishing (the flow's stages)."""
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.landing import ingest_landing
    from jurymeter.pipeline.publish import publish_run

    folder, _, reasons = hostile_folder
    (tmp_path / "jm.toml").write_text(f'store = "{tmp_path / "store"}"\nlanding = "{folder}"\n')
    config = load_config(tmp_path / "jm.toml", environ={})
    ingested = ingest_landing(config)
    assert ingested is not None  # never "nothing new" while files were there
    assert ingested["totals"]["accepted"] == 360
    named = {u["source"].rsplit("/", 1)[-1]: u["reason"] for u in ingested["sources_unreadable"]}
    assert set(named) == set(reasons)
    for name, reason in reasons.items():
        assert reason in named[name]
    store = Store(config.store)
    summary = publish_run(store, "with-bad-files", config=config, started="t", ingest_report=ingested,
                          outcomes=[], timings={})
    assert summary["status"] == "partial"
    assert summary["sources_unreadable"] == ingested["sources_unreadable"]
    alerts = summary["headlines"]["alerts"]
    assert len([a for a in alerts if a.startswith("source not ingested: ")]) == len(reasons)
    page = (tmp_path / "store" / "results" / "with-bad-files" / "report" / "index.html").read_text()
    assert f"source not ingested: {folder}/bad-\\xff-name.jsonl: file name is not UTF-8" in page
    assert "\udcff" not in page
    on_disk = orjson.loads((tmp_path / "store" / "results" / "with-bad-files" / "summary.json").read_bytes())
    assert on_disk["sources_unreadable"] == summary["sources_unreadable"]


def test_a_landing_of_unreadable_files_only_is_reported_not_nothing_new(tmp_path: Path) -> None:
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.landing import ingest_landing

    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "cut.jsonl.gz").write_bytes(b"these bytes are not gzip\n")
    (tmp_path / "jm.toml").write_text(f'store = "{tmp_path / "store"}"\nlanding = "{landing}"\n')
    ingested = ingest_landing(load_config(tmp_path / "jm.toml", environ={}))
    assert ingested is not None
    [bad] = ingested["sources_unreadable"]
    assert bad["source"] == str(landing / "cut.jsonl.gz")
    assert ingested["totals"]["read"] == 0


def test_on_s3_a_results_folder_without_summary_goes_only_once_untouched_for_a_day(
    moto_s3: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jurymeter.pipeline import publish

    store = Store(f"s3://{moto_s3.bucket}/store")  # type: ignore[attr-defined]
    store.write_bytes("results/20260101T000000Z-aaaaaaaa/summary.json", b"{}")
    store.write_bytes("results/20260101T000000Z-aaaaaaaa/leaderboard.parquet", b"x")
    store.write_bytes("results/20260102T000000Z-bbbbbbbb/leaderboard.parquet", b"x")
    store.write_bytes("results/cache/k/report.json", b"{}")
    with store.run_lock() as alone:
        assert not alone  # S3 has no lock the kernel releases: never "alone"
        assert publish.clean_unpublished(store, alone=alone) == []  # written just now: maybe a run publishing
        monkeypatch.setattr(publish, "UNPUBLISHED_STALE_SECONDS", -1.0)
        assert publish.clean_unpublished(store, alone=alone) == ["20260102T000000Z-bbbbbbbb"]
    keys = sorted(p.split("/store/", 1)[1] for p in store.fs.find(store.path("results")))
    assert keys == ["results/20260101T000000Z-aaaaaaaa/leaderboard.parquet",
                    "results/20260101T000000Z-aaaaaaaa/summary.json", "results/cache/k/report.json"]
