"""The ingest's stage steps mapped over a Dask cluster equal the serial ingest, and survive a SIGKILL.

| contract | independent reference |
| --- | --- |
| a mapped ingest (stage steps on 2 LocalCluster worker processes, commits in order) stores the same rows, markers' counts and quarantine as the serial ingest, on a folder with duplicates across files, a conflicting duplicate, a copy of one file under another name, a file that fails mid-read and quarantined records | the committed Parquet parts and markers read with ``json`` and ``pyarrow`` directly (no ``Store`` reader), compared with the serial ingest's |
| a cluster that cannot be reached: every step staged in the ingest's process, the same store | the same independent read |
| SIGKILL of a mapped ingest at several points, then a rerun, equals one clean ingest | a serial ingest of the same sources into another store |
"""

from __future__ import annotations

import gzip
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from ingest_util import assert_reconciled, assert_same_store, pointwise_records, write_jsonl
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from jurymeter.orchestration.tasks import cluster_stage_map

pytestmark = pytest.mark.slow

BLOCK = 256 * 1024  # small blocks: several parts a source, and the cut file stages parts before it fails


def _folder(root: Path) -> Path:
    """Sources with everything the commit order decides: duplicates across files, a conflict, a copy, a bad file."""
    root.mkdir(parents=True)
    base = pointwise_records(9_000, item_set="set-a", seed=1)
    first: list[dict | str] = list(base[:6_000])
    first[10] = {**first[10], "score": "bad"}  # quarantined: not a number
    first.append("{broken")  # quarantined: not JSON
    write_jsonl(root / "a-first.jsonl", first)
    second: list[dict | str] = list(base[3_000:])  # 3,000 rows re-delivered from a-first
    second[5] = {**second[5], "score": (float(second[5]["score"]) % 10) + 1}  # a conflicting duplicate
    write_jsonl(root / "b-second.jsonl", second)
    (root / "c-copy.jsonl").write_bytes((root / "a-first.jsonl").read_bytes())  # same content, another name
    write_jsonl(root / "d-other.jsonl", list(pointwise_records(5_000, item_set="set-b", seed=2)))
    cut = write_jsonl(root / "cut.tmp", list(pointwise_records(60_000, item_set="set-c", seed=4)))
    packed = bytearray(gzip.compress(cut.read_bytes(), compresslevel=1))
    cut.unlink()
    at = len(packed) * 9 // 10  # past what discovery decodes of its head: it fails part way, parts staged
    packed[at : at + 64] = b"\xff" * 64
    (root / "e-cut.jsonl.gz").write_bytes(bytes(packed))
    write_jsonl(root / "f-last.jsonl", list(pointwise_records(4_000, item_set="set-a", seed=3)))
    return root


def _committed(store_dir: Path) -> dict[str, object]:
    """Everything committed, read from the files themselves: markers' counts, data rows, quarantine rows."""
    markers = [json.loads(p.read_text()) for p in sorted((store_dir / "ingested").glob("*.json"))]
    counts = sorted((m["source"], m["content_key"], json.dumps(m["counts"], sort_keys=True)) for m in markers)
    data, quarantine = [], []
    for marker in markers:
        for relpath in marker["parts"]:
            frame = pl.from_arrow(pq.read_table(store_dir / relpath))
            assert isinstance(frame, pl.DataFrame)
            data.append(frame.with_columns(pl.lit(relpath.split("/")[2]).alias("partition")))
        quarantine += [pl.from_arrow(pq.read_table(store_dir / p)) for p in marker["quarantine_parts"]]
    rows = pl.concat(data, how="diagonal_relaxed")
    rejects = pl.concat(quarantine, how="diagonal_relaxed")  # type: ignore[arg-type]
    return {
        "counts": counts,
        "rows": rows.sort(rows.columns, nulls_last=True),
        "quarantine": rejects.sort(rejects.columns, nulls_last=True),
    }


def _parts(store_dir: Path) -> set[str]:
    """The part files under data/ and quarantine/ (``_staging/`` may keep a failed fast path's late file)."""
    return {str(p.relative_to(store_dir)) for top in ("data", "quarantine") for p in (store_dir / top).rglob("part-*")}


def _same(left: dict[str, object], right: dict[str, object]) -> None:
    assert left["counts"] == right["counts"]
    for name in ("rows", "quarantine"):
        a, b = left[name], right[name]
        assert isinstance(a, pl.DataFrame)
        assert isinstance(b, pl.DataFrame)
        assert a.equals(b), name


def _ingest(store_dir: Path, folder: Path, stage_map=None):  # type: ignore[no-untyped-def]
    store = Store(str(store_dir))
    report = ingest(store, discover_sources([str(folder)]), ValidationOptions(), block_bytes=BLOCK,
                    stage_map=stage_map)
    assert_reconciled(store, report)
    return report


def _recording(stage_map, kinds: list[str]):  # type: ignore[no-untyped-def]
    """``stage_map``, noting the kind of each result it gives (a stage step's, or an exception's class)."""

    def recorded(function, tasks):  # type: ignore[no-untyped-def]
        results = stage_map(function, tasks)
        try:
            for result in results:
                kinds.append(type(result).__name__)
                yield result
        finally:
            results.close()

    return recorded


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as local:
        yield local.scheduler_address


@pytest.fixture(scope="module")
def serial(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[tuple[str, str, int, int, int, int]]]:
    root = tmp_path_factory.mktemp("mapped")
    folder = _folder(root / "src")
    report = _ingest(root / "serial", folder)
    summary = [(s.source, s.status, s.read, s.accepted, s.quarantined, s.duplicates_dropped) for s in report.sources]
    return folder, root / "serial", summary


def test_the_folder_holds_what_the_comparison_needs(serial) -> None:  # type: ignore[no-untyped-def]
    _, _, summary = serial
    statuses = {Path(s[0]).name: s[1] for s in summary}
    assert statuses == {"a-first.jsonl": "ingested", "b-second.jsonl": "ingested", "c-copy.jsonl": "already_ingested",
                        "d-other.jsonl": "ingested", "e-cut.jsonl.gz": "unreadable", "f-last.jsonl": "ingested"}
    second = next(s for s in summary if s[0].endswith("b-second.jsonl"))
    assert second[5] == 2_999  # re-delivered rows dropped; the conflicting one quarantined
    assert second[4] == 1


def test_a_mapped_ingest_equals_the_serial_ingest(tmp_path: Path, serial, cluster: str) -> None:  # type: ignore[no-untyped-def]
    folder, serial_dir, summary = serial
    kinds: list[str] = []
    report = _ingest(tmp_path / "mapped", folder, _recording(cluster_stage_map(lambda: cluster), kinds))
    assert kinds == ["StagedSource"] * 5, (kinds, [s.status for s in report.sources])  # every source but the copy, staged by the workers
    assert [(s.source, s.status, s.read, s.accepted, s.quarantined, s.duplicates_dropped)
            for s in report.sources] == summary
    _same(_committed(tmp_path / "mapped"), _committed(serial_dir))
    assert_same_store(Store(str(tmp_path / "mapped")), Store(str(serial_dir)))
    assert _parts(tmp_path / "mapped") == _parts(serial_dir)  # the cut file's staged parts were removed by its worker


def test_without_a_reachable_cluster_every_step_is_staged_here(tmp_path: Path, serial) -> None:  # type: ignore[no-untyped-def]
    folder, serial_dir, summary = serial

    def no_cluster() -> str:
        raise OSError("the cluster did not start")

    kinds: list[str] = []
    report = _ingest(tmp_path / "fallback", folder, _recording(cluster_stage_map(no_cluster), kinds))
    assert kinds == ["NotMapped"] * 5
    assert [(s.source, s.status, s.read, s.accepted, s.quarantined, s.duplicates_dropped)
            for s in report.sources] == summary
    _same(_committed(tmp_path / "fallback"), _committed(serial_dir))


def test_an_early_landing_ingest_maps_over_the_cluster_once_it_is_up(
    tmp_path: Path, serial, cluster: str, monkeypatch: pytest.MonkeyPatch  # type: ignore[no-untyped-def]
) -> None:
    import threading

    import jurymeter.orchestration.flow as flow
    from jurymeter.pipeline.config import load_config

    folder, serial_dir, summary = serial
    kinds: list[str] = []
    real = flow.cluster_stage_map
    monkeypatch.setattr(flow, "cluster_stage_map", lambda scheduler: _recording(real(scheduler), kinds))
    up = threading.Event()

    def starting_cluster() -> str:  # what run_environment hands: waits for the LocalCluster it starts
        assert up.wait(60)
        return cluster

    config = load_config(None, environ={}, overrides={"store": str(tmp_path / "store"), "landing": str(folder)})
    flow.start_ingest_early(config, starting_cluster)
    up.set()
    report = flow.ingest_landing.fn(config)
    assert report is not None
    assert [(s["source"], s["status"], s["read"], s["accepted"], s["quarantined"], s["duplicates_dropped"])
            for s in report["sources"]] == summary
    assert kinds == ["StagedSource"] * 5
    _same(_committed(tmp_path / "store"), _committed(serial_dir))
    assert not flow._schedulers


def test_a_lost_workers_step_is_staged_again_here(tmp_path: Path, serial) -> None:  # type: ignore[no-untyped-def]
    """A step whose worker died after writing a part: that part goes, the source is staged here, the same store."""
    folder, serial_dir, summary = serial

    def losing(function, tasks):  # type: ignore[no-untyped-def]
        for task in tasks:
            if task.source.url.endswith("b-second.jsonl"):
                store = Store(task.settings.store_url)
                staged = function(task)  # the lost attempt wrote its parts ...
                assert staged.staged is not None
                store.write_parquet("data/protocol=pointwise/item_set=set-a/"
                                    f"part-{staged.staged.sid}-99999.parquet",  # ... and one more
                                    pl.read_parquet(store.path(staged.staged.parts[0][1])))
                yield RuntimeError("worker lost")  # what a KilledWorker future gives
            else:
                yield function(task)

    report = _ingest(tmp_path / "lost", folder, losing)
    assert [(s.source, s.status, s.read, s.accepted, s.quarantined, s.duplicates_dropped)
            for s in report.sources] == summary
    _same(_committed(tmp_path / "lost"), _committed(serial_dir))
    assert not list((tmp_path / "lost").rglob("part-*-99999.parquet"))


MAPPED_SCRIPT = """\
import sys
from distributed import LocalCluster
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from jurymeter.orchestration.tasks import cluster_stage_map

if __name__ == "__main__":
    folder, store = sys.argv[1:]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        print("cluster up", flush=True)
        address = cluster.scheduler_address
        ingest(Store(store), discover_sources([folder]), ValidationOptions(), block_bytes={BLOCK},
               stage_map=cluster_stage_map(lambda: address))
""".replace("{BLOCK}", str(BLOCK))


def _has(pattern: str) -> Callable[[Path], bool]:
    return lambda store: any(store.glob(pattern))


KILL_POINTS: list[tuple[str, Callable[[Path], bool]]] = [
    ("first data part staged", _has("data/**/part-*.parquet")),
    ("first source committed", _has("ingested/*.json")),
    ("third source committed", lambda store: len(list(store.glob("ingested/*.json"))) >= 3),
]


@pytest.mark.parametrize(("label", "when"), KILL_POINTS, ids=[k for k, _ in KILL_POINTS])
def test_sigkill_of_a_mapped_ingest_then_rerun_equals_one_clean_ingest(
    tmp_path: Path, serial, label: str, when: Callable[[Path], bool]  # type: ignore[no-untyped-def]
) -> None:
    folder, serial_dir, _ = serial
    script = tmp_path / "mapped_ingest.py"
    script.write_text(MAPPED_SCRIPT)
    store_dir = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, str(script), str(folder), str(store_dir)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not when(store_dir) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    alive = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert alive, (label, proc.stderr.read() if proc.stderr else "")
    time.sleep(1.0)  # the workers die with the driver (distributed's parent watch): nothing writes after this
    rerun = subprocess.run([sys.executable, "-m", "jurymeter.cli", "ingest", str(folder), "--store", str(store_dir),
                            "--block-mb", str(BLOCK / (1024 * 1024))], capture_output=True, text=True, timeout=300)
    assert rerun.returncode in (0, 6), rerun.stderr  # 6: the cut file is reported unreadable
    _same(_committed(store_dir), _committed(serial_dir))
    assert_same_store(Store(str(store_dir)), Store(str(serial_dir)))
    assert _parts(store_dir) == _parts(serial_dir)


@pytest.mark.s3
def test_a_mapped_ingest_on_s3_equals_the_serial_ingest(moto_s3, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from distributed import LocalCluster

    from jurymeter.io.quarantine import list_quarantine

    folder = _folder(tmp_path / "src")
    for path in sorted(folder.iterdir()):
        moto_s3.client.put_object(Bucket=moto_s3.bucket, Key=f"landing/{path.name}", Body=path.read_bytes())
    landing = f"s3://{moto_s3.bucket}/landing/"
    stores = {name: Store(f"s3://{moto_s3.bucket}/{name}") for name in ("serial", "mapped")}
    # Started here, after the fixture set the AWS environment: the workers reach moto's server by it.
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as local:
        address = local.scheduler_address
        kinds: list[str] = []
        reports = {
            name: ingest(store, discover_sources([landing]), ValidationOptions(), block_bytes=BLOCK,
                         stage_map=_recording(cluster_stage_map(lambda: address), kinds) if name == "mapped" else None)
            for name, store in stores.items()
        }
    assert kinds == ["StagedSource"] * 5
    notes = {name: [s.note for s in report.sources] for name, report in reports.items()}
    summaries = {name: [(s.source, s.status, s.read, s.accepted, s.quarantined, s.duplicates_dropped, s.content_key)
                        for s in report.sources] for name, report in reports.items()}
    assert summaries["mapped"] == summaries["serial"], notes["mapped"]
    assert [s[1] for s in summaries["mapped"]] == ["ingested", "ingested", "already_ingested", "ingested",
                                                   "unreadable", "ingested"]
    assert_same_store(stores["mapped"], stores["serial"])
    held = {name: list_quarantine(store, limit=None).rows.drop("raw") for name, store in stores.items()}
    assert held["mapped"].equals(held["serial"])
    def stored(name: str) -> list[str]:
        listing = moto_s3.client.list_objects_v2(Bucket=moto_s3.bucket, Prefix=f"{name}/")
        keys = (o["Key"].split("/", 1)[1] for o in listing.get("Contents", []))
        return sorted(k for k in keys if k.startswith(("data/", "quarantine/", "ingested/")))

    keys = {name: stored(name) for name in stores}
    assert keys["mapped"] == keys["serial"]  # the cut file's staged parts removed on S3 too


def test_a_conflicts_raw_text_is_its_line_as_the_reader_quotes_it(tmp_path: Path) -> None:
    """The commit step splits the lines again, without parsing: the text is still the line's, byte-exact."""
    base = {"item_set": "raw", "item_id": "i1", "system_id": "s1", "judge_id": "j1"}
    lines = [json.dumps({**base, "score": 7}), json.dumps({**base, "item_id": "i2", "score": 3}),
             json.dumps({**base, "score": 8}) + "  ", json.dumps({**base, "item_id": "i2", "score": 4})]
    path = tmp_path / "conflicts.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")  # a BOM, CRLF line ends
    store = Store(str(tmp_path / "store"))
    report = ingest(store, discover_sources([str(path)]), ValidationOptions())
    assert report.sources[0].reasons == {"conflicting_duplicate": 4}
    held = pl.concat([pl.from_arrow(pq.read_table(p)) for p in store.quarantine_files()])  # type: ignore[arg-type]
    assert dict(zip(held["line"], held["raw"], strict=True)) == {k + 1: text for k, text in enumerate(lines)}
