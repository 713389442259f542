#!/usr/bin/env bash
# Register the nightly deployment on a Prefect server: create the work pool
# jurymeter-pool (type process) if it is missing, then deploy infra/prefect.yaml.
#
#   PREFECT_API_URL=http://127.0.0.1:4200/api infra/scripts/work-pool.sh
#
# Runs in the repository root that holds this script, because prefect.yaml's entrypoint
# flows/nightly.py:nightly is relative to the current directory (and `prefect deploy`
# imports it). JURYMETER_ROOT, the directory where runs start (prefect.yaml's pull step),
# defaults to this checkout, which suits a process worker on this machine; set
# JURYMETER_ROOT=/app to deploy for workers running the Docker image.
# Re-running it updates the deployment. It starts no worker: scheduled runs wait until
# `prefect worker start --pool jurymeter-pool` runs somewhere.
set -euo pipefail

POOL=jurymeter-pool
: "${PREFECT_API_URL:?set PREFECT_API_URL (infra/scripts/prefect-server.sh prints it)}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export JURYMETER_ROOT="${JURYMETER_ROOT:-$ROOT}"
cd "$ROOT"
command -v prefect >/dev/null || { echo "work-pool.sh: no 'prefect' on PATH" >&2; exit 1; }

# One CLI call instead of inspect + create (each costs seconds of imports): an
# existing pool is left as it is.
if ! out="$(prefect work-pool create "$POOL" --type process 2>&1)"; then
  if [[ "$out" != *"already exists"* ]]; then
    echo "$out" >&2
    echo "work-pool.sh: could not create work pool '$POOL' on $PREFECT_API_URL" >&2
    exit 1
  fi
  echo "Work pool '$POOL' already exists."
else
  echo "Created work pool '$POOL' (type process)."
fi

prefect --no-prompt deploy --prefect-file infra/prefect.yaml --all
