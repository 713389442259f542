#!/usr/bin/env bash
# A local S3 (moto's standalone server, in memory) in the foreground on 127.0.0.1:PORT.
# Prints AWS_ENDPOINT_URL=http://127.0.0.1:PORT once it answers; Ctrl-C or SIGTERM
# stops it and every bucket is gone.
#
#   infra/scripts/s3-server.sh [PORT=5000]
#
# moto accepts any credentials: export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
# AWS_DEFAULT_REGION=us-east-1 and the printed AWS_ENDPOINT_URL, then create a bucket
# (for example with `aws s3 mb` or boto3) before using s3://bucket/prefix as the store.
# moto_server comes with the dev dependencies (moto[server]).
set -euo pipefail

PORT="${1:-5000}"
URL="http://127.0.0.1:${PORT}"

command -v moto_server >/dev/null || {
  echo "s3-server.sh: no 'moto_server' on PATH (uv sync installs it with the dev group)" >&2
  exit 1
}
if (exec 3<>"/dev/tcp/127.0.0.1/${PORT}") 2>/dev/null; then
  echo "s3-server.sh: port ${PORT} is already in use" >&2
  exit 1
fi

# moto_server replaces this shell (exec), so SIGTERM/SIGINT reach it directly. Its only
# companion is this readiness poller, which exits as soon as the server answers or is
# gone ($$ is the server's pid after the exec).
(
  trap 'exit 0' TERM INT
  while kill -0 $$ 2>/dev/null; do
    code=""
    if { exec 3<>"/dev/tcp/127.0.0.1/${PORT}"; } 2>/dev/null; then
      printf 'GET /moto-api/ HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
      read -r -t 5 _ code _ <&3 || true
      exec 3>&-
      if [[ "$code" == 200 ]]; then
        echo "AWS_ENDPOINT_URL=${URL}"
        exit 0
      fi
    fi
    sleep 0.1
  done
) &

exec moto_server -H 127.0.0.1 -p "$PORT"
