#!/usr/bin/env bash
# A long-lived Prefect server in the foreground on 127.0.0.1:PORT. Prints
# PREFECT_API_URL=http://127.0.0.1:PORT/api once /api/health answers; Ctrl-C or
# SIGTERM stops it.
#
#   infra/scripts/prefect-server.sh [PORT=4200]
#
# The database lives in $PREFECT_HOME, which defaults to ${JURYMETER_HOME:-.jurymeter}/prefect
# (relative to the current directory), never ~/.prefect. The first start on a new
# home also runs the database migrations: expect 10-30 s before the ready line.
set -euo pipefail

PORT="${1:-4200}"
URL="http://127.0.0.1:${PORT}/api"

command -v prefect >/dev/null || { echo "prefect-server.sh: no 'prefect' on PATH" >&2; exit 1; }
if (exec 3<>"/dev/tcp/127.0.0.1/${PORT}") 2>/dev/null; then
  echo "prefect-server.sh: port ${PORT} is already in use" >&2
  exit 1
fi
export PREFECT_HOME="${PREFECT_HOME:-${JURYMETER_HOME:-.jurymeter}/prefect}"
export PREFECT_SERVER_ANALYTICS_ENABLED=false
mkdir -p "$PREFECT_HOME"

# The server replaces this shell (exec), so SIGTERM/SIGINT reach it directly and it
# shuts itself down. Its only companion is this health poller, which exits as soon as
# the server answers or is gone ($$ is the server's pid after the exec). Plain bash
# /dev/tcp, so no curl is needed.
(
  trap 'exit 0' TERM INT
  while kill -0 $$ 2>/dev/null; do
    code=""
    if { exec 3<>"/dev/tcp/127.0.0.1/${PORT}"; } 2>/dev/null; then
      printf 'GET /api/health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
      read -r -t 5 _ code _ <&3 || true
      exec 3>&-
      if [[ "$code" == 200 ]]; then
        echo "PREFECT_API_URL=${URL}"
        exit 0
      fi
    fi
    sleep 0.25
  done
) &

exec prefect server start --host 127.0.0.1 --port "$PORT"
