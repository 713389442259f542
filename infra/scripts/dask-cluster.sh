#!/usr/bin/env bash
# A local Dask cluster in the foreground: one scheduler on 127.0.0.1:PORT and WORKERS
# worker processes (1 thread each). Prints DASK_SCHEDULER_ADDRESS=tcp://127.0.0.1:PORT
# once the workers have joined; Ctrl-C or SIGTERM stops every process it started.
#
#   infra/scripts/dask-cluster.sh [PORT=8786] [WORKERS=2]
#
# Uses the `dask` executable next to the first python on PATH (the project's venv:
# `PATH=.venv/bin:$PATH infra/scripts/dask-cluster.sh`), so the workers import the
# same jurymeter and library versions as the client.
set -euo pipefail

PORT="${1:-8786}"
WORKERS="${2:-2}"
ADDRESS="tcp://127.0.0.1:${PORT}"

PYTHON="$(command -v python || command -v python3 || true)"
if [[ -z "$PYTHON" || ! -x "$(dirname "$PYTHON")/dask" ]]; then
  echo "dask-cluster.sh: no 'dask' next to the python on PATH (${PYTHON:-none}); put the venv's bin first" >&2
  exit 1
fi
DASK="$(dirname "$PYTHON")/dask"
if (exec 3<>"/dev/tcp/127.0.0.1/${PORT}") 2>/dev/null; then
  echo "dask-cluster.sh: port ${PORT} is already in use" >&2
  exit 1
fi

scheduler=""

descendants() {  # every descendant of the given pids
  local pid child
  for pid in "$@"; do
    for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do
      echo "$child"
      descendants "$child"
    done
  done
}

alive() {  # those of the given pids that still run
  local pid
  for pid in "$@"; do
    if kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi
  done
}

terminate() {  # SIGTERM the given pids and wait up to 10 s for them to exit
  [[ $# -gt 0 ]] || return 0
  kill -TERM "$@" 2>/dev/null || true
  for _ in $(seq 50); do
    [[ -z "$(alive "$@")" ]] && return 0
    sleep 0.2
  done
}

cleanup() {
  trap - EXIT INT TERM
  local all others=() pid
  all="$(descendants $$)"
  for pid in $(ps -o pid= --ppid $$ 2>/dev/null); do
    [[ "$pid" == "$scheduler" ]] || others+=("$pid")
  done
  # Workers first, while the scheduler can still answer their goodbye (closing both at
  # once leaves workers waiting on a dead scheduler); then the scheduler; then SIGKILL
  # anything left (a nanny's worker process, for example).
  terminate ${others[@]+"${others[@]}"}
  if [[ -n "$scheduler" ]]; then terminate "$scheduler"; fi
  kill -KILL $(alive $all) 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$DASK" scheduler --host 127.0.0.1 --port "$PORT" &
scheduler=$!

# Wait until the scheduler accepts connections (or dies).
for _ in $(seq 600); do
  if (exec 3<>"/dev/tcp/127.0.0.1/${PORT}") 2>/dev/null; then break; fi
  if ! kill -0 "$scheduler" 2>/dev/null; then
    echo "dask-cluster.sh: the scheduler exited (is port ${PORT} taken?)" >&2
    exit 1
  fi
  sleep 0.1
done
(exec 3<>"/dev/tcp/127.0.0.1/${PORT}") 2>/dev/null || {
  echo "dask-cluster.sh: the scheduler did not listen on ${PORT} within 60 s" >&2
  exit 1
}

for _ in $(seq "$WORKERS"); do
  # The nanny sets MALLOC_TRIM_THRESHOLD_=65536, which turns off glibc's adaptive
  # mmap threshold and slows numpy-heavy fits 1.6-1.8x; a fixed one restores it
  # (see WORKER_MALLOC in src/jurymeter/orchestration/runtime.py).
  MALLOC_MMAP_THRESHOLD_=67108864 "$DASK" worker "$ADDRESS" --host 127.0.0.1 --nthreads 1 --nworkers 1 --no-dashboard &
done

# Ready means the workers have registered, not only that their processes started.
"$PYTHON" - "$ADDRESS" "$WORKERS" <<'PY'
import sys

from distributed import Client

with Client(sys.argv[1], timeout=60) as client:
    client.wait_for_workers(int(sys.argv[2]), timeout=120)
PY
echo "DASK_SCHEDULER_ADDRESS=${ADDRESS}"

# Run until killed; if any process of the cluster exits, stop the rest and fail.
wait -n || true
echo "dask-cluster.sh: a cluster process exited; stopping the others" >&2
exit 1
