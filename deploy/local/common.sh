# Shared settings for the local stack scripts; sourced, not run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
LOCAL="${DRIFTGAUGE_LOCAL_DIR:-$ROOT/.local}"
PG_PORT="${DRIFTGAUGE_PG_PORT:-55432}"
PG_DIR="$LOCAL/pg"
PG_BIN="${PG_BIN:-$(ls -d /usr/lib/postgresql/15/bin 2>/dev/null || true)}"
OS_HTTP_PORT="${DRIFTGAUGE_OS_PORT:-9250}"
OS_DIR="$LOCAL/opensearch"
OS_HEAP="${DRIFTGAUGE_OS_HEAP:-1g}"
OS_VERSION="2.19.1"
MY_PORT="${DRIFTGAUGE_MARIADB_PORT:-53306}"
MY_DIR="$LOCAL/mariadb"

log() { printf '[driftgauge-local] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
