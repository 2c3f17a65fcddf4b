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

# Whether any process's command line names MARKER (a path only this checkout's server has).
marked_alive() { pgrep -f -- "$1" >/dev/null; }

# Stop a server started under setsid: the group its pid file names, then every process whose
# command line names MARKER. When the caller has job control, setsid forks and the pid file
# names a launcher that has already exited, so the pid file alone would miss the server.
stop_server() {
  local name="$1" pidfile="$2" marker="$3" pid="" alive=""
  [ -f "$pidfile" ] && pid="$(cat "$pidfile")"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    alive=1
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
  fi
  if marked_alive "$marker"; then
    alive=1
    pkill -f -- "$marker" || true
  fi
  rm -f "$pidfile"
  if [ -z "$alive" ]; then log "$name not running"; return 0; fi
  for _ in $(seq 1 30); do marked_alive "$marker" || break; sleep 1; done
  pkill -9 -f -- "$marker" || true
  log "$name stopped"
}
