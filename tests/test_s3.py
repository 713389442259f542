"""The judgment store and ingest on S3, against moto's standalone server.

The server, the bucket and the AWS environment come from the ``moto_s3``
fixture (``tests/conftest.py``), as in s3fs's own test-suite. Every expectation
about S3 is the behaviour of the same operation on a local folder: the local
store is the reference.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from jurymeter.cli import app
from jurymeter.errors import ConfigError, SourceError, StoreError, StoreLockedError
from jurymeter.io.info import quarantine_counts, store_info
from jurymeter.io.ingest import ingest
from jurymeter.io.ingest_report import IngestReport
from jurymeter.io.schema import SCHEMAS
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.store_options import s3fs_options
from jurymeter.io.validate import ValidationOptions

pytestmark = pytest.mark.s3

SCALE = ValidationOptions(scale=(1.0, 10.0))
KEY_SECRET = "SECRETKEY123"
SECRET_SECRET = "SECRETVALUE456"

# Pointwise log: lines 1, 2, 5, 7 are accepted; 3 (score "high"), 4 (not JSON)
# and 8 (score 11 on a 1..10 scale) are quarantined; 6 re-delivers line 1.
POINTWISE_LINES = [
    '{"item_set": "mt", "item_id": "i1", "system_id": "s1", "judge_id": "j1", "score": 7}',
    '{"item_set": "mt", "item_id": "i1", "system_id": "s2", "judge_id": "j1", "score": 4.5,'
    ' "batch_id": "b1"}',
    '{"item_set": "mt", "item_id": "i2", "system_id": "s1", "judge_id": "j1", "score": "high"}',
    "not json at all",
    '{"item_set": "mt", "item_id": "i2", "system_id": "s2", "judge_id": "j1", "score": 9,'
    ' "generation": 1}',
    '{"item_set": "mt", "item_id": "i1", "system_id": "s1", "judge_id": "j1", "score": 7}',
    '{"item_set": "code", "item_id": "c1", "system_id": "s1", "judge_id": "j2", "score": 2}',
    '{"item_set": "mt", "item_id": "i3", "system_id": "s1", "judge_id": "j1", "score": 11}',
]
POINTWISE_COUNTS = {"read": 8, "accepted": 4, "quarantined": 3, "duplicates_dropped": 1}
POINTWISE_REASONS = {"malformed_line": 1, "score_out_of_scale": 1, "wrong_type": 1}

# Pairwise log: line 4 compares a system with itself; "model_b" means "B".
PAIRWISE_CSV = (
    "item_set,item_id,system_a,system_b,judge_id,winner\n"
    "mt,i1,s1,s2,j1,A\n"
    "mt,i2,s1,s2,j1,tie\n"
    "mt,i3,s1,s1,j1,B\n"
    "mt,i4,s2,s1,j2,model_b\n"
)
PAIRWISE_COUNTS = {"read": 4, "accepted": 3, "quarantined": 1, "duplicates_dropped": 0}

# A gzip-compressed pointwise log of its own item set.
GZ_LINES = [
    '{"item_set": "gz", "item_id": "g1", "system_id": "s1", "judge_id": "j1", "score": 3}',
    '{"item_set": "gz", "item_id": "g2", "system_id": "s1", "judge_id": "j1", "score": 5.5}',
    '{"item_set": "gz", "item_id": "g2", "system_id": "s2", "judge_id": "j1", "score": "n/a"}',
]

COUNTS = ("read", "accepted", "quarantined", "duplicates_dropped")


# ---------------------------------------------------------------- helpers


@pytest.fixture(autouse=True)
def _fast_lock_polling(monkeypatch) -> None:
    """Poll a held S3 lock often and confirm it quickly: waiting costs the tests little."""
    monkeypatch.setattr("jurymeter.io.store_locks.S3_LOCK_POLL_SECONDS", 0.05)
    monkeypatch.setattr("jurymeter.io.store_locks.S3_LOCK_CONFIRM_SECONDS", 0.05)


def write_sources(folder: Path) -> dict[str, Path]:
    """The test logs as local files."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = {
        "pointwise": folder / "pointwise.jsonl",
        "pairwise": folder / "pairwise.csv",
        "gz": folder / "more.jsonl.gz",
    }
    paths["pointwise"].write_text("\n".join(POINTWISE_LINES) + "\n")
    paths["pairwise"].write_text(PAIRWISE_CSV)
    paths["gz"].write_bytes(gzip.compress(("\n".join(GZ_LINES) + "\n").encode()))
    return paths


def counts_of(report: IngestReport) -> dict[str, dict[str, int]]:
    return {Path(s.source).name: {k: getattr(s, k) for k in COUNTS} for s in report.sources}


def object_keys(moto_s3, prefix: str) -> list[str]:
    listing = moto_s3.client.list_objects_v2(Bucket=moto_s3.bucket, Prefix=prefix)
    return sorted(o["Key"] for o in listing.get("Contents", []))


def put_object(moto_s3, key: str, body: bytes) -> None:
    moto_s3.client.put_object(Bucket=moto_s3.bucket, Key=key, Body=body)


def sort_key(protocol: str) -> list[str]:
    return list(SCHEMAS[protocol].key)  # type: ignore[index]


def judgments(store: Store) -> dict[tuple[str, str], pl.DataFrame]:
    """Every item set of both judgment protocols, rows in key order."""
    out = {}
    for protocol in ("pointwise", "pairwise"):
        for item_set in store.item_sets(protocol):  # type: ignore[arg-type]
            frame = store.scan(protocol, item_set).collect()  # type: ignore[arg-type]
            out[protocol, item_set] = frame.sort(sort_key(protocol), nulls_last=True)
    return out


def quarantine(store: Store) -> pl.DataFrame:
    frames = [store.read_parquet(p) for p in store.quarantine_files()]
    return pl.concat(frames).sort("source", "line") if frames else pl.DataFrame()


def assert_same_store(actual: Store, expected: Store) -> None:
    got, want = judgments(actual), judgments(expected)
    assert sorted(got) == sorted(want)
    for key, frame in want.items():
        assert_frame_equal(got[key], frame)
    assert_frame_equal(quarantine(actual), quarantine(expected))
    assert_frame_equal(store_info(actual), store_info(expected))


def dead_pid() -> int:
    """The pid of a process of this host that has exited."""
    child = subprocess.Popen([sys.executable, "-S", "-c", "pass"])
    child.wait()
    return child.pid


def dead_endpoint() -> str:
    """A local URL on which nothing listens (connections are refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# ---------------------------------------------------------------- environment


def test_plain_aws_environment_reaches_moto(moto_s3) -> None:
    """With no storage options, s3fs/botocore take the endpoint from AWS_ENDPOINT_URL."""
    assert os.environ["AWS_ENDPOINT_URL"] == moto_s3.endpoint
    store = Store(f"s3://{moto_s3.bucket}/env-store")
    store.create()
    assert object_keys(moto_s3, "env-store/") == ["env-store/jurymeter-store.json"]
    assert store.exists()
    assert not Path("s3:").exists(), "an s3:// store must not become a local folder"


def test_endpoint_url_storage_option_without_environment(moto_s3, monkeypatch) -> None:
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    store = Store(f"s3://{moto_s3.bucket}/opt-store", {"endpoint_url": moto_s3.endpoint})
    store.create()
    assert object_keys(moto_s3, "opt-store/") == ["opt-store/jurymeter-store.json"]


def test_storage_option_text_values_are_typed() -> None:
    """``--storage-option anon=false`` must not turn on anonymous access ("false" is truthy)."""
    options = s3fs_options(
        {"anon": "false", "use_ssl": "True", "endpoint_url": "http://h:1", "region": "eu-west-1"}
    )
    assert options == {
        "anon": False,
        "use_ssl": True,
        "client_kwargs": {"endpoint_url": "http://h:1", "region_name": "eu-west-1"},
    }
    assert s3fs_options({"anon": True}) == {"anon": True}
    with pytest.raises(ConfigError, match="anon must be true or false"):
        s3fs_options({"anon": "maybe"})
    # A client_kwargs table from the config file is merged, not replaced.
    assert s3fs_options({"client_kwargs": {"verify": False}, "endpoint_url": "http://h:1"}) == {
        "client_kwargs": {"verify": False, "endpoint_url": "http://h:1"}
    }


# ---------------------------------------------------------------- 1. round trip


def test_round_trip_on_s3_store(moto_s3, tmp_path) -> None:
    paths = write_sources(tmp_path / "logs")
    url = f"s3://{moto_s3.bucket}/store"
    report = ingest(
        Store(url), discover_sources([str(paths["pointwise"]), str(paths["pairwise"])]), SCALE
    )

    assert counts_of(report) == {
        "pointwise.jsonl": POINTWISE_COUNTS,
        "pairwise.csv": PAIRWISE_COUNTS,
    }
    for source in report.sources:
        assert source.status == "ingested"
        assert source.read == source.accepted + source.quarantined + source.duplicates_dropped
    assert report.sources[0].reasons == POINTWISE_REASONS
    assert report.sources[1].reasons == {"same_system": 1}

    # Everything is in the bucket: format marker, two commit markers, one run manifest.
    keys = object_keys(moto_s3, "store/")
    assert "store/jurymeter-store.json" in keys
    assert sum(k.startswith("store/ingested/") for k in keys) == 2
    assert sum(k.startswith("store/runs/") for k in keys) == 1
    assert any(k.startswith("store/data/protocol=pointwise/item_set=") for k in keys)
    assert "store/_lock.json" not in keys, "the write lock must be released"

    fresh = Store(url)  # a new reader of the same store
    pointwise = fresh.scan("pointwise", "mt").collect()
    assert dict(pointwise.schema) == dict(SCHEMAS["pointwise"].dtypes)
    assert pointwise.sort("item_id", "system_id").select(
        "item_set", "item_id", "system_id", "judge_id", "score", "generation", "batch_id"
    ).to_dicts() == [
        {
            "item_set": "mt",
            "item_id": "i1",
            "system_id": "s1",
            "judge_id": "j1",
            "score": 7.0,
            "generation": 0,
            "batch_id": None,
        },
        {
            "item_set": "mt",
            "item_id": "i1",
            "system_id": "s2",
            "judge_id": "j1",
            "score": 4.5,
            "generation": 0,
            "batch_id": "b1",
        },
        {
            "item_set": "mt",
            "item_id": "i2",
            "system_id": "s2",
            "judge_id": "j1",
            "score": 9.0,
            "generation": 1,
            "batch_id": None,
        },
    ]
    assert fresh.item_sets("pointwise") == ["code", "mt"]
    assert fresh.scan("pointwise", "code").collect()["score"].to_list() == [2.0]

    pairwise = fresh.scan("pairwise", "mt").collect()
    assert dict(pairwise.schema) == dict(SCHEMAS["pairwise"].dtypes)
    assert pairwise.sort("item_id").select("item_id", "system_a", "system_b", "winner").rows() == [
        ("i1", "s1", "s2", "A"),
        ("i2", "s1", "s2", "tie"),
        ("i4", "s2", "s1", "B"),
    ]

    info = store_info(fresh)
    assert info.select("protocol", "item_set", "records", "systems", "judges").rows() == [
        ("pointwise", "code", 1, 1, 1),
        ("pointwise", "mt", 3, 2, 1),
        ("pairwise", "mt", 3, 2, 2),
    ]

    files = fresh.quarantine_files()
    assert files
    assert all(f.startswith(f"{moto_s3.bucket}/store/quarantine/part-") for f in files)
    held = quarantine(fresh)
    assert held.select("source", "line", "reason").rows() == [
        (str(paths["pairwise"]), 4, "same_system"),
        (str(paths["pointwise"]), 3, "wrong_type"),
        (str(paths["pointwise"]), 4, "malformed_line"),
        (str(paths["pointwise"]), 8, "score_out_of_scale"),
    ]
    assert held["raw"].to_list() == [
        "mt,i3,s1,s1,j1,B",
        POINTWISE_LINES[2],
        POINTWISE_LINES[3],
        POINTWISE_LINES[7],
    ]
    assert dict(zip(*quarantine_counts(fresh).to_dict().values(), strict=True)) == {
        "malformed_line": 1,
        "same_system": 1,
        "score_out_of_scale": 1,
        "wrong_type": 1,
    }


# ---------------------------------------------------------------- 2. local == S3


def test_s3_store_equals_local_store(moto_s3, tmp_path) -> None:
    paths = write_sources(tmp_path / "logs")
    specs = [str(p) for p in paths.values()]
    local = Store(str(tmp_path / "local-store"))
    remote = Store(f"s3://{moto_s3.bucket}/store")
    local_report = ingest(local, discover_sources(specs), SCALE)
    remote_report = ingest(remote, discover_sources(specs), SCALE)

    assert counts_of(remote_report) == counts_of(local_report)
    assert [s.reasons for s in remote_report.sources] == [s.reasons for s in local_report.sources]
    assert len(judgments(local)) == 4  # pointwise code, gz, mt and pairwise mt
    assert_same_store(remote, local)
    # Lineage columns too: the same source id and line for every record.
    for protocol in ("pointwise", "pairwise"):
        lineage = ["_source_id", "_source_line"]
        got = remote.scan(protocol, columns=[*sort_key(protocol), *lineage]).collect()
        want = local.scan(protocol, columns=[*sort_key(protocol), *lineage]).collect()
        assert_frame_equal(got.sort(sort_key(protocol)), want.sort(sort_key(protocol)))


def test_s3_scan_reads_extra_columns_absent_from_some_parts_as_null(moto_s3, tmp_path) -> None:
    base = '{"item_set": "mt", "item_id": "%s", "system_id": "s1", "judge_id": "j1", "score": 5'
    (tmp_path / "a.jsonl").write_text(base % "i1" + "}\n")
    (tmp_path / "b.jsonl").write_text(base % "i2" + ', "note": "late"}\n')
    store = Store(f"s3://{moto_s3.bucket}/store")
    # Two sources, so two parts.
    ingest(store, discover_sources([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]), SCALE)
    assert len(store.data_files("pointwise", "mt")) == 2
    frame = store.scan("pointwise", "mt", columns=["item_id", "note", "nowhere", "score"])
    got = frame.collect().sort("item_id")
    assert got.schema == pl.Schema(
        {"item_id": pl.String, "note": pl.String, "nowhere": pl.String, "score": pl.Float64}
    )
    assert got.rows() == [("i1", None, None, 5.0), ("i2", "late", None, 5.0)]


# ---------------------------------------------------------------- 3. sources on S3


@pytest.mark.parametrize(
    ("spec", "local_names", "s3_keys"),
    [
        pytest.param(
            "s3://bucket/landing/",
            ["gz", "pairwise", "pointwise"],
            ["landing/more.jsonl.gz", "landing/pairwise.csv", "landing/pointwise.jsonl"],
            id="folder",
        ),
        pytest.param(
            "s3://bucket/landing/*.jsonl", ["pointwise"], ["landing/pointwise.jsonl"], id="glob"
        ),
        pytest.param(
            "s3://bucket/landing/more.jsonl.gz", ["gz"], ["landing/more.jsonl.gz"], id="gzip"
        ),
    ],
)
def test_ingest_sources_on_s3(moto_s3, tmp_path, spec, local_names, s3_keys) -> None:
    paths = write_sources(tmp_path / "logs")
    for path in paths.values():
        put_object(moto_s3, f"landing/{path.name}", path.read_bytes())
    put_object(moto_s3, "landing/README.txt", b"not a log")  # ignored in a folder

    sources = discover_sources([spec])
    assert [s.url for s in sources] == [f"s3://{moto_s3.bucket}/{k}" for k in s3_keys]
    by_name = {p.name: p for p in paths.values()}
    assert [s.size for s in sources] == [
        by_name[k.rsplit("/", 1)[-1]].stat().st_size for k in s3_keys
    ]
    from_s3 = Store(str(tmp_path / "from-s3"))
    report = ingest(from_s3, sources, SCALE)
    assert all(s.status == "ingested" for s in report.sources)

    from_disk = Store(str(tmp_path / "from-disk"))
    reference = ingest(from_disk, discover_sources([str(paths[n]) for n in local_names]), SCALE)
    assert counts_of(report) == counts_of(reference)
    assert [s.content_key for s in report.sources] == [s.content_key for s in reference.sources]
    assert judgments(from_s3).keys() == judgments(from_disk).keys()
    for key, frame in judgments(from_disk).items():
        assert_frame_equal(judgments(from_s3)[key], frame)
    if "gz" in local_names:  # decompressed, not read as bytes
        gz = from_s3.scan("pointwise", "gz").collect().sort("item_id")
        assert gz.select("item_id", "score").rows() == [("g1", 3.0), ("g2", 5.5)]
    # Quarantined records name their S3 source.
    held = quarantine(from_s3)
    assert held.height == sum(s.quarantined for s in report.sources) > 0
    assert all(src.startswith("s3://bucket/landing/") for src in held["source"])


def test_missing_s3_source_is_a_source_error(moto_s3) -> None:
    for spec in ("s3://bucket/nothing-here/", "s3://bucket/landing/*.jsonl"):
        with pytest.raises(SourceError, match="source not found"):
            discover_sources([spec])


# ---------------------------------------------------------------- 4. re-ingest


def test_reingest_into_s3_store_is_a_no_op(moto_s3, tmp_path) -> None:
    paths = write_sources(tmp_path / "logs")
    specs = [str(paths["pointwise"]), str(paths["pairwise"])]
    url = f"s3://{moto_s3.bucket}/store"
    ingest(Store(url), discover_sources(specs), SCALE)
    before = judgments(Store(url))
    data_before = object_keys(moto_s3, "store/data/") + object_keys(moto_s3, "store/quarantine/")

    again = ingest(Store(url), discover_sources(specs), SCALE)
    assert [s.status for s in again.sources] == ["already_ingested", "already_ingested"]
    assert all(s.read == s.accepted == s.quarantined == 0 for s in again.sources)
    assert again.removed_uncommitted == 0
    assert [s.protocol for s in again.sources] == ["pointwise", "pairwise"]
    assert object_keys(moto_s3, "store/data/") + object_keys(moto_s3, "store/quarantine/") == (
        data_before
    )
    after = judgments(Store(url))
    assert after.keys() == before.keys()
    for key, frame in before.items():
        assert_frame_equal(after[key], frame)
    assert len(object_keys(moto_s3, "store/runs/")) == 2


# ---------------------------------------------------------------- 5. the S3 lock


class SlowWrites:
    """An fsspec file system whose uploads take ``delay`` seconds (a slow network)."""

    def __init__(self, fs, delay: float) -> None:
        self._fs, self._delay = fs, delay

    def pipe_file(self, *args, **kwargs):
        time.sleep(self._delay)
        return self._fs.pipe_file(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._fs, name)


def test_s3_lock_excludes_a_second_writer_until_released(moto_s3) -> None:
    url = f"s3://{moto_s3.bucket}/store"
    Store(url).create()
    taken, release, failures = threading.Event(), threading.Event(), []

    def holder() -> None:
        try:
            with Store(url).lock(timeout=5):
                taken.set()
                release.wait(20)
        except Exception as exc:  # surfaced by the assertion below
            failures.append(exc)
            taken.set()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert taken.wait(10)
        assert not failures
        start = time.monotonic()
        with pytest.raises(StoreLockedError) as info, Store(url).lock(timeout=1):
            pytest.fail("a second writer got the lock")
        assert time.monotonic() - start >= 1.0  # it waited out its timeout (no upper bound: not a timing test)
        message = str(info.value)
        assert message.startswith(f"store {url} is locked by another ingest")
        assert f"pid {os.getpid()} on {socket.gethostname()}" in message
        assert "--lock-timeout" in message
        assert "\n" not in message
    finally:
        release.set()
        thread.join(20)
    assert not failures
    assert "store/_lock.json" not in object_keys(moto_s3, "store/")
    with Store(url).lock(timeout=5):
        assert "store/_lock.json" in object_keys(moto_s3, "store/")
    assert "store/_lock.json" not in object_keys(moto_s3, "store/")


def test_s3_ingest_waits_for_the_lock(moto_s3, tmp_path) -> None:
    paths = write_sources(tmp_path / "logs")
    store = Store(f"s3://{moto_s3.bucket}/store")
    store.create()
    with store.lock(timeout=5), pytest.raises(StoreLockedError, match="locked by another ingest"):
        ingest(
            Store(store.url), discover_sources([str(paths["pointwise"])]), SCALE, lock_timeout=0.5
        )
    assert object_keys(moto_s3, "store/ingested/") == []


def test_s3_lock_is_exclusive_under_contention(moto_s3) -> None:
    url = f"s3://{moto_s3.bucket}/store"
    Store(url).create()
    inside, spans, failures = [0], [], []
    guard = threading.Lock()

    def writer() -> None:
        try:
            with Store(url).lock(timeout=30):
                with guard:
                    inside[0] += 1
                    overlap = inside[0] > 1
                start = time.monotonic()
                time.sleep(0.1)
                spans.append((start, time.monotonic(), overlap))
                with guard:
                    inside[0] -= 1
        except Exception as exc:
            failures.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures
    assert len(spans) == 3
    assert not any(overlap for *_, overlap in spans), "two writers held the S3 lock at once"


def test_s3_lock_survives_a_slow_upload(moto_s3) -> None:
    """A writer whose lock upload lands late must not overwrite a lock taken meanwhile.

    The slow writer finds no lock and starts its upload; a fast writer takes the
    lock and confirms it before the slow upload lands. An unconditional PUT
    would then overwrite the fast writer's lock and both would be inside.
    """
    url = f"s3://{moto_s3.bucket}/store"
    Store(url).create()
    spans: dict[str, tuple[float, float]] = {}
    failures: list[BaseException] = []

    def writer(name: str, store: Store, hold: float) -> None:
        try:
            with store.lock(timeout=15):
                start = time.monotonic()
                time.sleep(hold)
                spans[name] = (start, time.monotonic())
        except Exception as exc:
            failures.append(exc)

    slow = Store(url)
    slow.fs = SlowWrites(slow.fs, delay=0.4)
    threads = [
        threading.Thread(target=writer, args=("slow", slow, 0.1)),
        threading.Thread(target=writer, args=("fast", Store(url), 0.8)),
    ]
    threads[0].start()
    time.sleep(0.1)
    threads[1].start()
    for t in threads:
        t.join(30)
    assert not failures
    assert sorted(spans) == ["fast", "slow"]
    (_, first_end), (second_start, _) = sorted(spans.values())
    assert first_end <= second_start, f"two writers held the S3 lock at once: {spans}"


def stale_lock(moto_s3, **fields) -> dict:
    held = {
        "token": "old-owner",
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "time": time.time(),
        **fields,
    }
    put_object(moto_s3, "store/_lock.json", json.dumps(held).encode())
    return held


def lock_owner(moto_s3) -> dict:
    body = moto_s3.client.get_object(Bucket=moto_s3.bucket, Key="store/_lock.json")["Body"]
    return orjson.loads(body.read())


def test_s3_lock_of_a_dead_process_is_taken_over(moto_s3) -> None:
    store = Store(f"s3://{moto_s3.bucket}/store")
    store.create()
    stale_lock(moto_s3, pid=dead_pid())
    start = time.monotonic()
    with store.lock(timeout=3):
        owner = lock_owner(moto_s3)
        assert owner["token"] != "old-owner"
        assert owner["pid"] == os.getpid()
    assert time.monotonic() - start < 3
    assert "store/_lock.json" not in object_keys(moto_s3, "store/")


def test_s3_lock_older_than_the_stale_limit_is_taken_over(moto_s3) -> None:
    store = Store(f"s3://{moto_s3.bucket}/store")
    store.create()
    stale_lock(moto_s3, host="another-host", pid=1, time=time.time() - 7 * 3600)
    with store.lock(timeout=3):
        assert lock_owner(moto_s3)["token"] != "old-owner"


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"host": "another-host", "pid": 1}, id="live-elsewhere"),
        pytest.param({}, id="live-here"),
    ],
)
def test_s3_lock_of_a_live_process_is_respected(moto_s3, fields) -> None:
    store = Store(f"s3://{moto_s3.bucket}/store")
    store.create()
    held = stale_lock(moto_s3, **fields)
    with (
        pytest.raises(StoreLockedError, match=f"pid {held['pid']} on {held['host']}"),
        store.lock(timeout=0.5),
    ):
        pass
    assert lock_owner(moto_s3)["token"] == "old-owner", "a live lock must be left alone"


# ---------------------------------------------------------------- 6. no credentials in output


def secret_free(text: str) -> bool:
    return KEY_SECRET not in text and SECRET_SECRET not in text


def test_cli_never_prints_credentials(moto_s3, tmp_path) -> None:
    paths = write_sources(tmp_path / "logs")
    store_url = f"s3://{moto_s3.bucket}/x"
    credentials = [
        "--storage-option",
        f"key={KEY_SECRET}",
        "--storage-option",
        f"secret={SECRET_SECRET}",
    ]
    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "ingest",
            str(paths["pointwise"]),
            str(paths["pairwise"]),
            "--store",
            store_url,
            "--scale",
            "1,10",
            *credentials,
            "--storage-option",
            f"endpoint_url={moto_s3.endpoint}",
        ],
        env={"AWS_ENDPOINT_URL": None},
    )
    assert result.exit_code == 0, result.output
    assert "holds for every source" in result.stdout
    assert secret_free(result.stdout + result.stderr)
    info = runner.invoke(
        app,
        [
            "store",
            "info",
            "--json",
            "--store",
            store_url,
            *credentials,
            "--storage-option",
            f"endpoint_url={moto_s3.endpoint}",
        ],
        env={"AWS_ENDPOINT_URL": None},
    )
    assert info.exit_code == 0, info.output
    assert [s["records"] for s in orjson.loads(info.stdout)["item_sets"]] == [1, 3, 3]
    assert secret_free(info.stdout + info.stderr)
    # Nor in anything written to the store (markers, run manifests).
    for key in object_keys(moto_s3, "x/"):
        if key.endswith(".json"):
            body = moto_s3.client.get_object(Bucket=moto_s3.bucket, Key=key)["Body"].read()
            assert secret_free(body.decode()), key


def assert_one_line_error(stdout: str, stderr: str, *needles: str) -> None:
    assert secret_free(stdout + stderr)
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.parametrize(
    ("store_url", "endpoint", "needles"),
    [
        pytest.param(
            "s3://bucket/x",
            "dead",
            ["cannot create store s3://bucket/x", "Could not connect"],
            id="unreachable-endpoint",
        ),
        pytest.param(
            "s3://no-such-bucket/x",
            "moto",
            ["s3://no-such-bucket/x", "bucket does not exist"],
            id="missing-bucket",
        ),
    ],
)
def test_cli_failure_is_one_line_without_credentials(
    moto_s3, tmp_path, store_url, endpoint, needles
) -> None:
    paths = write_sources(tmp_path / "logs")
    url = dead_endpoint() if endpoint == "dead" else moto_s3.endpoint
    result = CliRunner().invoke(
        app,
        [
            "ingest",
            str(paths["pointwise"]),
            "--store",
            store_url,
            "--storage-option",
            f"key={KEY_SECRET}",
            "--storage-option",
            f"secret={SECRET_SECRET}",
            "--storage-option",
            f"endpoint_url={url}",
        ],
        env={"AWS_ENDPOINT_URL": None, "AWS_MAX_ATTEMPTS": "1"},
    )
    assert result.exit_code == 1
    # Exit 1 through the CLI's error handler, not an exception escaping it
    # (the console script would print that one's traceback).
    assert isinstance(result.exception, SystemExit), result.exception
    assert_one_line_error(result.stdout, result.stderr, *needles)


def test_cli_unknown_storage_option_names_the_key_not_the_value(moto_s3, tmp_path) -> None:
    paths = write_sources(tmp_path / "logs")
    result = CliRunner().invoke(
        app,
        [
            "ingest",
            str(paths["pointwise"]),
            "--store",
            "s3://bucket/x",
            "--storage-option",
            f"secrett={SECRET_SECRET}",
        ],
    )
    assert result.exit_code == 1
    assert isinstance(result.exception, SystemExit), result.exception
    assert_one_line_error(result.stdout, result.stderr, "unknown storage option 'secrett'")


# ---------------------------------------------------------------- 7. store errors


def test_missing_bucket_is_a_store_error(moto_s3, tmp_path) -> None:
    paths = write_sources(tmp_path / "logs")
    store = Store("s3://no-such-bucket/store")
    with pytest.raises(StoreError) as info:
        ingest(store, discover_sources([str(paths["pointwise"])]), SCALE)
    assert "\n" not in str(info.value)
    assert "no-such-bucket" in str(info.value)
    with pytest.raises(StoreError):
        store_info(store)
    assert not store.exists()


def test_unreachable_endpoint_is_a_store_error(moto_s3, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    paths = write_sources(tmp_path / "logs")
    store = Store("s3://bucket/store", {"endpoint_url": dead_endpoint()})
    start = time.monotonic()
    for action in (
        lambda: ingest(store, discover_sources([str(paths["pointwise"])]), SCALE),
        store.exists,
        lambda: store_info(store),
    ):
        with pytest.raises(StoreError) as info:
            action()
        assert "\n" not in str(info.value)
        assert str(info.value).startswith("cannot ")
    assert time.monotonic() - start < 20


def test_conflicting_storage_options_are_a_store_error(moto_s3) -> None:
    with pytest.raises(StoreError, match="cannot open store s3://bucket/x") as info:
        Store("s3://bucket/x", {"key": KEY_SECRET, "username": SECRET_SECRET})
    assert secret_free(str(info.value))


class FailingCommits:
    """An fsspec file system on which writing a commit marker fails (the link drops)."""

    def __init__(self, fs) -> None:
        self._fs = fs

    def pipe_file(self, path, *args, **kwargs):
        if "/ingested/" in path:
            from botocore.exceptions import EndpointConnectionError

            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9/" + path)
        return self._fs.pipe_file(path, *args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._fs, name)


def test_failed_commit_on_s3_is_a_store_error_and_is_cleaned_up(moto_s3, tmp_path) -> None:
    paths = write_sources(tmp_path / "logs")
    specs = [str(paths["pointwise"])]
    url = f"s3://{moto_s3.bucket}/store"
    broken = Store(url)
    broken.fs = FailingCommits(broken.fs)
    with pytest.raises(StoreError, match=r"^cannot write s3://bucket/store/ingested/") as info:
        ingest(broken, discover_sources(specs), SCALE)
    assert "\n" not in str(info.value)
    leftovers = object_keys(moto_s3, "store/data/") + object_keys(moto_s3, "store/quarantine/")
    assert leftovers, "the parts were written before the commit failed"
    # The commit writes the source's cell statistics (io/cell_stats.py) and key values
    # (io/key_values.py) just before its marker.
    leftovers += object_keys(moto_s3, "store/cells/") + object_keys(moto_s3, "store/keys/")
    assert any(key.endswith("-cells.parquet") for key in leftovers)
    assert any(key.endswith("-keys.parquet") for key in leftovers)
    assert object_keys(moto_s3, "store/ingested/") == []
    assert "store/_lock.json" not in object_keys(moto_s3, "store/"), "lock released on error"
    assert judgments(Store(url)) == {}, "readers never see an uncommitted source"

    report = ingest(Store(url), discover_sources(specs), SCALE)
    assert report.removed_uncommitted == len(leftovers)
    assert counts_of(report) == {"pointwise.jsonl": POINTWISE_COUNTS}
    local = Store(str(tmp_path / "local"))
    ingest(local, discover_sources(specs), SCALE)
    assert_same_store(Store(url), local)


def test_unreachable_source_endpoint_is_a_source_error(moto_s3, monkeypatch) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    options = s3fs_options({"endpoint_url": dead_endpoint()})
    with pytest.raises(SourceError) as info:
        discover_sources(["s3://bucket/landing/"], storage_options=options)
    assert "\n" not in str(info.value)
    assert "s3://bucket/landing/" in str(info.value)


def test_the_merged_cell_statistics_on_s3_equal_the_local_ones(moto_s3, tmp_path) -> None:
    """The first fit after an ingest merges each source's cell file: read by polars' S3 reader, the same arrays."""
    from jurymeter.io.cell_stats import item_set_cells

    specs = [str(write_sources(tmp_path / "logs")["pointwise"])]
    s3, local = Store(f"s3://{moto_s3.bucket}/store"), Store(str(tmp_path / "local"))
    for store in (s3, local):
        ingest(store, discover_sources(specs), SCALE)
    sets = sorted(s for s in local.item_sets("pointwise"))
    assert sets
    for item_set in sets:
        remote, here = item_set_cells(s3, "pointwise", item_set), item_set_cells(local, "pointwise", item_set)
        assert (remote is None) == (here is None)
        if here is not None and remote is not None:
            assert remote.levels == here.levels
            assert np.array_equal(remote.counts, here.counts)
            assert np.array_equal(remote.sums, here.sums)
            assert remote.records == here.records > 0


def test_many_files_are_written_to_s3_in_one_batch_and_a_failure_is_one_store_error(moto_s3) -> None:
    """A report's pages go up concurrently (one ``pipe``); each object whole, a dropped link one line."""
    store = Store(f"s3://{moto_s3.bucket}/store")
    files = {f"results/run/report/page-{k:03d}.html": f"<p>{k}</p>".encode() * (k + 1) for k in range(40)}
    store.write_files(files)
    for relpath, data in files.items():
        assert moto_s3.client.get_object(Bucket=moto_s3.bucket, Key=f"store/{relpath}")["Body"].read() == data

    class DroppedLink:
        def __init__(self, fs) -> None:
            self._fs = fs

        def pipe(self, *args, **kwargs):
            from botocore.exceptions import EndpointConnectionError

            raise EndpointConnectionError(endpoint_url="http://127.0.0.1:9/")

        def __getattr__(self, name: str):
            return getattr(self._fs, name)

    store.fs = DroppedLink(store.fs)
    with pytest.raises(StoreError, match=r"^cannot write s3://bucket/store/results/run/report/") as info:
        store.write_files(files)
    assert "\n" not in str(info.value)
