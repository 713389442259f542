"""Shared fixtures."""

from __future__ import annotations

import logging
import socket
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from flow_util import free_port, start_ready, stop_group, venv_env

S3_BUCKET = "bucket"
ROOT = Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Test files holding a ``slow`` or ``against_r`` (Rscript) test first, each file's tests together and in their order.

    pytest-xdist (``--dist loadfile`` in pyproject.toml) hands the files to its two workers in
    this order: the long ones (the flow's Prefect and Dask runs, the demo) start at once, side by
    side, instead of one of them starting last and running alone while the other worker idles.
    """
    def path(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    slow = {path(item) for item in items
            if item.get_closest_marker("slow") is not None or item.get_closest_marker("against_r") is not None}
    first = {p: i for i, p in enumerate(dict.fromkeys(path(item) for item in items))}
    items.sort(key=lambda item: (path(item) not in slow, first[path(item)]))


@dataclass(frozen=True)
class MotoS3:
    """A running moto S3 server and a boto3 client on it."""

    endpoint: str
    port: int
    bucket: str
    client: object

    def reset(self) -> None:
        """Forget every bucket and object, then create the test bucket again."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10):
            pass
        self.client.create_bucket(Bucket=self.bucket)  # type: ignore[attr-defined]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def moto_s3_server() -> Iterator[MotoS3]:
    """moto's standalone S3 server for the session, as in s3fs's own test-suite.

    The plain AWS environment variables point every client (botocore, s3fs) at
    it; they are restored when the session ends.
    """
    pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    from moto.server import ThreadedMotoServer

    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    werkzeug = logging.getLogger("werkzeug")
    old_level = werkzeug.level
    werkzeug.setLevel(logging.ERROR)
    patch = pytest.MonkeyPatch()
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
        patch.delenv(name, raising=False)
    patch.setenv("AWS_ACCESS_KEY_ID", "testing")
    patch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    patch.setenv("AWS_ENDPOINT_URL", endpoint)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket=S3_BUCKET)
        yield MotoS3(endpoint=endpoint, port=port, bucket=S3_BUCKET, client=client)
    finally:
        server.stop()
        patch.undo()
        werkzeug.setLevel(old_level)


@pytest.fixture
def moto_s3(moto_s3_server: MotoS3) -> Iterator[MotoS3]:
    """The moto server with an empty test bucket and no cached s3fs instances."""
    import s3fs

    moto_s3_server.reset()
    s3fs.S3FileSystem.clear_instance_cache()
    yield moto_s3_server
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One long-lived Prefect server for the flow tests of a worker, started by the infra script.

    Here, not in a test module, so every file that asks for it (``tests/test_nightly.py``,
    ``tests/test_run_crash.py``) gets the same server when xdist runs them in one process: a
    fixture imported into a second module is a second fixture, and started a second server.
    """
    home = tmp_path_factory.mktemp("prefect-home")
    proc, url = start_ready(
        ["bash", str(ROOT / "infra/scripts/prefect-server.sh"), str(free_port())],
        "PREFECT_API_URL=", venv_env(PREFECT_HOME=str(home)), home,
    )
    try:
        yield url
    finally:
        stop_group(proc)
