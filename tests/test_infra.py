"""The deployment files in ``infra/``: they parse and agree with each other and with
the code, and the local scripts start what they say, print their ready line and
leave no process behind.

The slow tests run the real scripts against a new ``PREFECT_HOME`` under
``tmp_path``; the Prefect one deploys ``infra/prefect.yaml`` (copied with
``work-pool.sh`` into a temporary project whose ``flows/nightly.py`` is a stub
with the real flow's name and parameters), so it tests the infra files, not the
flow.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
INFRA = ROOT / "infra"
SCRIPTS = INFRA / "scripts"
EXPECTED_SCRIPTS = {"dask-cluster.sh", "prefect-server.sh", "s3-server.sh", "work-pool.sh"}
VENV_BIN = Path(sys.executable).parent  # the venv running the tests: prefect, dask, moto_server
POOL = "jurymeter-pool"
DEPLOYMENT = "jurymeter-nightly"
FLOW_NAME = "jurymeter-nightly"

STUB_FLOW = f'''"""Stand-in for the nightly flow: same entrypoint, name and parameters."""

from prefect import flow


@flow(name="{FLOW_NAME}")
def nightly(config_path: str | None = None, force: bool = False) -> None:
    """Do nothing."""
'''


# ---------------------------------------------------------------- helpers


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prefect_yaml() -> dict[str, Any]:
    return yaml.safe_load((INFRA / "prefect.yaml").read_text())


def the_deployment() -> dict[str, Any]:
    deployments = prefect_yaml()["deployments"]
    assert [d["name"] for d in deployments] == [DEPLOYMENT]
    return deployments[0]


def documented_image() -> str:
    """The image tag of the build command in infra/README.md (the Dockerfile repeats it)."""
    command = r"docker build -f infra/Dockerfile -t (\S+) \."
    readme = re.findall(command, (INFRA / "README.md").read_text())
    dockerfile = re.findall(command, (INFRA / "Dockerfile").read_text())
    assert readme, "infra/README.md must show the docker build command"
    assert set(readme) == set(dockerfile), "README and Dockerfile show different images"
    assert len(set(readme)) == 1
    return readme[0]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = (INFRA / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    out = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def script_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The test's environment with the venv first on PATH and Prefect kept in tmp_path."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"PREFECT_API_URL", "PREFECT_PROFILE", "JURYMETER_ROOT", "JURYMETER_HOME"}}
    env.update(
        PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
        PREFECT_HOME=str(tmp_path / "prefect-home"),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PREFECT_LOGGING_LEVEL="WARNING",
        DASK_LOGGING__DISTRIBUTED="warning",
    )
    env.update(extra)
    return env


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


class Script:
    """One infra script run in its own process group; stdout is read continuously."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path, log: Path) -> None:
        self.log_path = log
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=self._log,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    def output(self) -> str:
        self._log.flush()
        return ("stdout:\n" + "\n".join(self.lines[-30:]) + "\nstderr:\n"
                + "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:]))

    def wait_for(self, prefix: str, timeout: float) -> str:
        """The value of the first stdout line ``PREFIX...``; fails if the script exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if line.startswith(prefix):
                    return line[len(prefix):]
            if self.proc.poll() is not None:
                time.sleep(0.2)  # let the reader catch the last lines
                if any(line.startswith(prefix) for line in self.lines):
                    continue
                pytest.fail(f"{self.proc.args} exited ({self.proc.returncode}) "
                            f"before printing {prefix!r}\n{self.output()}")
            time.sleep(0.1)
        pytest.fail(f"{self.proc.args} printed no {prefix!r} within {timeout} s\n{self.output()}")

    def terminate(self, timeout: float) -> int:
        """SIGTERM to the script only (not its group): its own cleanup must do the rest."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.proc.args} still running {timeout} s after SIGTERM\n{self.output()}")

    def kill_group(self) -> None:
        """Finalizer: SIGKILL whatever is left in the script's process group."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self._log.close()


@pytest.fixture
def start_script(tmp_path: Path) -> Iterator[Any]:
    """Start an infra script; every process group started is killed at teardown."""
    started: list[Script] = []

    def start(path: Path, *args: object, env: dict[str, str], cwd: Path | None = None) -> Script:
        script = Script([str(path), *map(str, args)], env, cwd or tmp_path,
                        tmp_path / f"{path.stem}.{len(started)}.log")
        started.append(script)
        return script

    yield start
    for script in started:
        script.kill_group()


# ---------------------------------------------------------------- static checks


def test_prefect_yaml_deploys_the_nightly_flow_on_the_process_pool() -> None:
    config = prefect_yaml()
    deployment = the_deployment()
    assert deployment["entrypoint"] == "flows/nightly.py:nightly"
    assert deployment["work_pool"]["name"] == POOL
    assert deployment["schedules"] == [{"cron": "15 2 * * *", "timezone": "UTC", "active": True}]
    assert deployment["parameters"] == {"config_path": "jurymeter.toml"}
    assert config["pull"] == [
        {"prefect.deployments.steps.set_working_directory": {"directory": "{{ $JURYMETER_ROOT }}"}}
    ]
    assert config.get("build") is None
    assert config.get("push") is None
    # work-pool.sh creates that pool with that type and deploys this file from the root.
    work_pool = (SCRIPTS / "work-pool.sh").read_text()
    assert f"POOL={POOL}" in work_pool
    assert 'prefect work-pool create "$POOL" --type process' in work_pool
    assert "prefect --no-prompt deploy --prefect-file infra/prefect.yaml --all" in work_pool
    # The image sets the directory the pull step falls back to.
    assert any(word == "ENV" and "JURYMETER_ROOT=/app" in args.split()
               for word, args in dockerfile_instructions())


def test_prefect_entrypoint_is_the_nightly_flow() -> None:
    """flows/nightly.py (the deployment's entry point) exposes the library's ``nightly``, a flow
    named like the deployment's flow, accepting the deployment's parameters."""
    entry = ROOT / "flows" / "nightly.py"
    assert entry.exists(), "flows/nightly.py (prefect.yaml's entrypoint) is missing"
    imports = [node for node in ast.parse(entry.read_text()).body if isinstance(node, ast.ImportFrom)]
    assert any(node.module == "jurymeter.orchestration.flow" and [a.name for a in node.names] == ["nightly"]
               for node in imports), "flows/nightly.py must import nightly from jurymeter.orchestration.flow"
    path = ROOT / "src" / "jurymeter" / "orchestration" / "flow.py"
    module = ast.parse(path.read_text())
    functions = [node for node in module.body
                 if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "nightly"]
    assert len(functions) == 1, "jurymeter/orchestration/flow.py must define one top-level function nightly"
    function = functions[0]
    decorators = [d for d in function.decorator_list
                  if isinstance(d, ast.Call) and ast.unparse(d.func) in {"flow", "prefect.flow"}]
    assert decorators, "nightly must be decorated with @flow(...)"
    names = {k.arg: ast.literal_eval(k.value) for k in decorators[0].keywords if k.arg == "name"}
    assert names.get("name") == FLOW_NAME, f"the deployment is documented as {FLOW_NAME}/{DEPLOYMENT}"
    arguments = function.args
    parameters = [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]
    assert {"config_path", "force"} <= set(parameters)
    assert set(the_deployment()["parameters"]) <= set(parameters)


def test_dask_cluster_manifest_is_a_dask_cluster_of_the_documented_image() -> None:
    documents = list(yaml.safe_load_all((INFRA / "k8s" / "dask-cluster.yaml").read_text()))
    assert len(documents) == 1
    cluster = documents[0]
    assert cluster["apiVersion"] == "kubernetes.dask.org/v1"
    assert cluster["kind"] == "DaskCluster"
    name = cluster["metadata"]["name"]
    scheduler, worker = cluster["spec"]["scheduler"], cluster["spec"]["worker"]
    assert scheduler["service"]["selector"] == {
        "dask.org/cluster-name": name, "dask.org/component": "scheduler"}
    assert {p["port"] for p in scheduler["service"]["ports"]} >= {8786}
    assert worker["replicas"] >= 1
    containers = scheduler["spec"]["containers"] + worker["spec"]["containers"]
    image = documented_image()
    assert {c["image"] for c in containers} == {image}
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert image.rsplit(":", 1)[1] == version, "the image tag is the package version"
    assert all(c["resources"]["requests"] and c["resources"]["limits"] for c in containers)
    assert scheduler["spec"]["containers"][0]["args"][:2] == ["dask", "scheduler"]
    worker_container = worker["spec"]["containers"][0]
    assert worker_container["args"][:2] == ["dask", "worker"]
    assert {"secretRef": {"name": "jurymeter-s3"}} in worker_container["envFrom"]
    # The service name the README tells the flow to use.
    assert f"{name}-scheduler" in (INFRA / "README.md").read_text()


def test_dockerfile_installs_the_lock_file_and_copies_the_flows() -> None:
    instructions = dockerfile_instructions()
    assert instructions[0] == ("FROM", "python:3.11-slim")
    runs = [args for word, args in instructions if word == "RUN"]
    syncs = [args for args in runs if "uv sync" in args]
    assert syncs, "the image must install with uv sync"
    for sync in syncs:
        for flag in ("--frozen", "--no-dev", "--compile-bytecode"):
            assert flag in sync, f"{flag} missing from: uv sync {sync}"
    assert "--no-install-project" not in syncs[-1]
    copied = " ".join(args for word, args in instructions if word == "COPY")
    for needed in ("pyproject.toml", "uv.lock", "README.md", "src/", "flows/"):
        assert needed in copied, f"the Dockerfile must copy {needed}"
    assert ("WORKDIR", "/app") in instructions
    assert instructions[-1] == ("CMD", '["jurymeter", "run"]')


def test_there_are_the_four_scripts() -> None:
    assert {p.name for p in SCRIPTS.glob("*.sh")} == EXPECTED_SCRIPTS


@pytest.mark.parametrize("name", sorted(EXPECTED_SCRIPTS))
def test_script_is_executable_strict_bash(name: str) -> None:
    path = SCRIPTS / name
    assert os.access(path, os.X_OK), f"{name} is not executable"
    text = path.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail" in text
    check = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr


# ---------------------------------------------------------------- the scripts, for real


def descendants(pid: int) -> list[Any]:
    import psutil

    return psutil.Process(pid).children(recursive=True)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_dask_cluster_script_serves_two_workers_and_stops_them_all(
    tmp_path: Path, start_script: Any
) -> None:
    import psutil
    from distributed import Client

    port = free_port()
    script = start_script(SCRIPTS / "dask-cluster.sh", port, 2, env=script_env(tmp_path))
    address = script.wait_for("DASK_SCHEDULER_ADDRESS=", timeout=120)
    assert address == f"tcp://127.0.0.1:{port}"
    with Client(address, timeout=30) as client:
        client.wait_for_workers(2, timeout=60)
        assert len(client.scheduler_info()["workers"]) == 2
        assert client.submit(sum, [1, 2, 3]).result(timeout=30) == 6
    processes = descendants(script.proc.pid)
    assert len(processes) >= 3  # the scheduler and two workers (plus their worker processes)

    assert script.terminate(timeout=30) == 128 + signal.SIGTERM
    _, alive = psutil.wait_procs(processes, timeout=15)
    assert not alive, f"left behind: pids {[p.pid for p in alive]}"
    leftovers = [p.info["cmdline"] for p in psutil.process_iter(["cmdline"])
                 if any(f"127.0.0.1:{port}" in part for part in (p.info["cmdline"] or []))]
    assert not leftovers


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_prefect_server_script_then_work_pool_script_register_the_deployment(
    tmp_path: Path, start_script: Any
) -> None:
    # A temporary project: the real prefect.yaml and work-pool.sh, a stub flow.
    project = tmp_path / "project"
    (project / "infra" / "scripts").mkdir(parents=True)
    (project / "flows").mkdir()
    shutil.copy2(INFRA / "prefect.yaml", project / "infra" / "prefect.yaml")
    shutil.copy2(SCRIPTS / "work-pool.sh", project / "infra" / "scripts" / "work-pool.sh")
    (project / "flows" / "nightly.py").write_text(STUB_FLOW)

    # The server's home defaults to $JURYMETER_HOME/prefect.
    home = tmp_path / "jurymeter-home"
    port = free_port()
    server_env = script_env(tmp_path, JURYMETER_HOME=str(home))
    del server_env["PREFECT_HOME"]
    server = start_script(SCRIPTS / "prefect-server.sh", port, env=server_env)
    api = server.wait_for("PREFECT_API_URL=", timeout=180)
    assert api == f"http://127.0.0.1:{port}/api"
    assert get_json(f"{api}/health") is True
    assert (home / "prefect" / "prefect.db").exists()

    deploy = subprocess.run(
        [str(project / "infra" / "scripts" / "work-pool.sh")],
        env=script_env(tmp_path, PREFECT_API_URL=api, PREFECT_HOME=str(home / "prefect")),
        cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False,
    )
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr

    pool = get_json(f"{api}/work_pools/{POOL}")
    assert pool["type"] == "process"
    deployment = get_json(f"{api}/deployments/name/{FLOW_NAME}/{DEPLOYMENT}")
    assert deployment["work_pool_name"] == POOL
    assert deployment["entrypoint"] == "flows/nightly.py:nightly"
    assert deployment["parameters"] == {"config_path": "jurymeter.toml"}
    schedules = [(s["schedule"]["cron"], s["schedule"]["timezone"], s["active"])
                 for s in deployment["schedules"]]
    assert schedules == [("15 2 * * *", "UTC", True)]
    # JURYMETER_ROOT defaults to the checkout holding the script: runs start there.
    assert deployment["pull_steps"] == [
        {"prefect.deployments.steps.set_working_directory": {"directory": str(project)}}
    ]

    processes = descendants(server.proc.pid)
    server.terminate(timeout=60)
    import psutil

    _, alive = psutil.wait_procs(processes, timeout=10)
    assert not alive


@pytest.mark.slow
@pytest.mark.s3
@pytest.mark.timeout(120)
def test_s3_server_script_serves_buckets(tmp_path: Path, start_script: Any) -> None:
    import boto3

    port = free_port()
    server = start_script(SCRIPTS / "s3-server.sh", port, env=script_env(tmp_path))
    endpoint = server.wait_for("AWS_ENDPOINT_URL=", timeout=60)
    assert endpoint == f"http://127.0.0.1:{port}"
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket="jurymeter-infra")
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["jurymeter-infra"]
    server.terminate(timeout=15)
