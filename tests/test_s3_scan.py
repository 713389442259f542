"""Reading an S3 store is lazy: a query fetches the columns and row groups it needs, not the objects.

A fit's memory must follow its cells, not its records; on S3 that needs the
store's scan to push projection and predicate down to the object reads, as
``pl.scan_parquet`` does on a local disk. The evidence is independent of the
reader: a counting HTTP proxy between the store and moto's server tallies the
bytes of every response. The local store of the same source is the reference
for what the scan returns.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from ingest_util import run_ingest
from jurymeter.errors import StoreError
from jurymeter.io.store import Store

pytestmark = pytest.mark.s3

SYSTEMS, JUDGES, REPLICATES, ITEMS = 20, 10, 2, 300  # 120,000 records
NOTE_BYTES = 160  # a hardly compressible extra column: most of each object's bytes


class CountingProxy:
    """An HTTP proxy in front of moto's server that counts response bytes, by method."""

    def __init__(self, upstream: str) -> None:
        target = urlsplit(upstream)
        self.bytes: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                upstream_conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "connection"}
                upstream_conn.request(self.command, self.path, body=body, headers=headers)
                response = upstream_conn.getresponse()
                data = response.read()
                upstream_conn.close()
                with lock:
                    proxy.bytes[self.command] += len(data)
                    proxy.requests[self.command] += 1
                self.send_response_only(response.status, response.reason)
                for key, value in response.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _forward

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def reset(self) -> None:
        self.bytes.clear()
        self.requests.clear()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(moto_s3) -> Iterator[CountingProxy]:
    counting = CountingProxy(moto_s3.endpoint)
    yield counting
    counting.close()


def _dump(path: Path) -> Path:
    """A crossed design, rows in (item, system, judge, replicate) order, with a wide note."""
    n = SYSTEMS * JUDGES * REPLICATES * ITEMS
    k = np.arange(n)
    rng = np.random.default_rng(7)
    notes = [bytes(row).hex() for row in rng.integers(0, 256, size=(n, NOTE_BYTES // 2), dtype=np.uint8)]
    frame = pl.DataFrame(
        {
            "item_set": "chat",
            "item_id": [f"item-{i:04d}" for i in k // (SYSTEMS * JUDGES * REPLICATES)],
            "system_id": [f"sys-{s:02d}" for s in (k // (JUDGES * REPLICATES)) % SYSTEMS],
            "judge_id": [f"judge-{j:02d}" for j in (k // REPLICATES) % JUDGES],
            "replicate": k % REPLICATES,
            "score": (1 + (k * 7919) % 10).astype(float),
            "note": notes,
        }
    )
    frame.write_ndjson(path)
    return path


def _object_bytes(moto_s3, prefix: str) -> int:
    listing = moto_s3.client.list_objects_v2(Bucket=moto_s3.bucket, Prefix=prefix)
    return sum(o["Size"] for o in listing["Contents"] if o["Key"].endswith(".parquet"))


def _stores(moto_s3, tmp_path: Path) -> tuple[Store, Store]:
    source = _dump(tmp_path / "dump.jsonl")
    local = Store(str(tmp_path / "local"))
    run_ingest(local, source)
    # Written straight to moto, read through the proxy below.
    run_ingest(Store(f"s3://{moto_s3.bucket}/store"), source, block_bytes=8 * 1024 * 1024)
    return local, Store(f"s3://{moto_s3.bucket}/store")


def _selective(lazy: pl.LazyFrame) -> pl.LazyFrame:
    """One column of one item's records (the first item: row-group statistics can skip the rest)."""
    return lazy.filter(pl.col("item_id") == "item-0000").select("score")


def test_an_s3_scan_fetches_only_the_columns_and_row_groups_a_query_needs(
    moto_s3, proxy, tmp_path
) -> None:
    local, _ = _stores(moto_s3, tmp_path)
    remote = Store(f"s3://{moto_s3.bucket}/store", {"endpoint_url": proxy.endpoint})
    assert len(remote.data_files("pointwise", "chat")) > 1
    total = _object_bytes(moto_s3, "store/data/")

    proxy.reset()  # from the scan on: a scan that downloads its parts pays here or below
    lazy = remote.scan("pointwise", "chat", columns=["item_id", "system_id", "score", "note"])
    got = _selective(lazy).collect()
    fetched = proxy.bytes["GET"]
    want = _selective(local.scan("pointwise", "chat", columns=["item_id", "score"])).collect()
    assert_frame_equal(got, want)
    assert got.height == SYSTEMS * JUDGES * REPLICATES
    # The note column alone is most of each object; a lazy read never touches it.
    assert fetched < 0.2 * total, (fetched, total)

    plan = _selective(lazy).explain()
    assert "Parquet SCAN" in plan, plan  # not an in-memory frame
    assert "s3://" in plan, plan
    assert "SELECTION" in plan, plan  # the filter is pushed into the scan

    proxy.reset()
    whole = lazy.select("score").collect()
    assert whole.height == SYSTEMS * JUDGES * REPLICATES * ITEMS
    assert proxy.bytes["GET"] < 0.5 * total, (proxy.bytes["GET"], total)


def test_an_s3_scan_equals_the_local_scan_of_the_same_records(moto_s3, proxy, tmp_path) -> None:
    local, _ = _stores(moto_s3, tmp_path)
    remote = Store(f"s3://{moto_s3.bucket}/store", {"endpoint_url": proxy.endpoint})
    order = ["item_id", "system_id", "judge_id", "replicate"]
    lineage = ["_source_id", "_source_line"]
    for columns in (None, [*order, "score", "note", *lineage], ["score", "nowhere"]):
        got = remote.scan("pointwise", "chat", columns=columns).collect()
        want = local.scan("pointwise", "chat", columns=columns).collect()
        sort = [c for c in order if c in got.columns] or got.columns
        assert_frame_equal(got.sort(sort), want.sort(sort))
    # The statistics' access pattern: filtered, streamed in batches.
    query = remote.scan("pointwise").filter(pl.col("judge_id") == "judge-03").select("score", "item_id")
    batches = list(query.collect_batches(maintain_order=True, engine="streaming"))
    got = pl.concat(batches).sort("item_id", "score")
    want = local.scan("pointwise").filter(pl.col("judge_id") == "judge-03").select("score", "item_id")
    assert_frame_equal(got, want.collect().sort("item_id", "score"))


def test_options_without_a_polars_equivalent_scan_lazily_through_pyarrow(
    moto_s3, proxy, tmp_path
) -> None:
    local, _ = _stores(moto_s3, tmp_path)
    options = {"endpoint_url": proxy.endpoint, "config_kwargs": {"connect_timeout": 30}}
    remote = Store(f"s3://{moto_s3.bucket}/store", options)
    lazy = remote.scan("pointwise", "chat", columns=["item_id", "score", "note"])
    plan = _selective(lazy).explain()
    assert "PYTHON SCAN" in plan, plan  # pyarrow's dataset, not an in-memory frame
    assert "SELECTION" in plan, plan
    proxy.reset()
    got = _selective(lazy).collect()
    fetched, total = proxy.bytes["GET"], _object_bytes(moto_s3, "store/data/")
    assert 0 < fetched < 0.5 * total, (fetched, total)  # read when collected, and not whole
    want = _selective(local.scan("pointwise", "chat", columns=["item_id", "score"])).collect()
    assert_frame_equal(got, want)


def test_s3fs_options_map_onto_polars_object_store_keys() -> None:
    from jurymeter.io.store_options import polars_s3_options

    endpoint = {"client_kwargs": {"endpoint_url": "http://127.0.0.1:9", "region_name": "eu-west-1"}}
    mapped = polars_s3_options({**endpoint, "key": "K", "secret": "S", "token": "T", "use_ssl": False})
    assert mapped == {
        "storage_options": {
            "aws_endpoint_url": "http://127.0.0.1:9",
            "aws_allow_http": "true",
            "aws_region": "eu-west-1",
            "aws_access_key_id": "K",
            "aws_secret_access_key": "S",
            "aws_session_token": "T",
        },
        "credential_provider": None,
    }
    anon = polars_s3_options({"anon": True, "requester_pays": True})
    assert anon is not None
    assert anon["storage_options"] == {"aws_skip_signature": "true", "aws_request_payer": "true"}
    # What s3fs resolved fills in what the options leave out; AWS's own hosts are left to polars.
    resolved = polars_s3_options({}, endpoint_url="https://minio.example:9000", region="us-east-1")
    assert resolved is not None
    assert resolved["storage_options"] == {
        "aws_endpoint_url": "https://minio.example:9000",
        "aws_region": "us-east-1",
    }
    assert callable(resolved["credential_provider"])  # botocore's chain, as s3fs
    aws = polars_s3_options({}, endpoint_url="https://s3.eu-west-1.amazonaws.com", region="eu-west-1")
    assert aws is not None
    assert aws["storage_options"] == {"aws_region": "eu-west-1"}
    for unmapped in ({"session": object()}, {"config_kwargs": {}}, {"client_kwargs": {"verify": False}}):
        assert polars_s3_options(unmapped) is None


def test_a_polars_reader_that_cannot_reach_the_store_is_a_store_error_at_scan_time(
    moto_s3, tmp_path
) -> None:
    _stores(moto_s3, tmp_path)
    remote = Store(f"s3://{moto_s3.bucket}/store")
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    # As if the options had sent polars elsewhere than s3fs (the listing still works).
    remote._reader = {
        "storage_options": {"aws_endpoint_url": dead, "aws_allow_http": "true", "aws_region": "us-east-1"},
        "credential_provider": None,
        "retries": 0,
    }
    with pytest.raises(StoreError, match="with polars' S3 reader"):
        remote.scan("pointwise", "chat")
