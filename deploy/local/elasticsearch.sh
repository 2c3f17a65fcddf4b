#!/usr/bin/env bash
# Start, stop or report a real single-node Elasticsearch 7.10.2 (elasticsearch-cluster-runner
# from Maven Central), the engine of the elasticsearch kind; part of the local stack (stack.sh).
# Usage: deploy/local/elasticsearch.sh start|stop|status|url   (see docs/elasticsearch.md)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ES_VERSION="7.10.2"
ES_HTTP_PORT="${DRIFTGAUGE_ES_PORT:-9260}"
ES_DIR="$LOCAL/elasticsearch"
ES_HEAP="${DRIFTGAUGE_ES_HEAP:-512m}"
# The runner binds http on base port + 1 for node 1.
BASE_PORT=$((ES_HTTP_PORT - 1))
# Nodes with one cluster name on one machine find each other over the transport ports and
# join; this name differs from the OpenSearch runner's, so the two never join.
ES_CLUSTER="${DRIFTGAUGE_ES_CLUSTER:-driftgauge-es-local}"
PIDFILE="$ES_DIR/elasticsearch.pid"
URL="http://127.0.0.1:$ES_HTTP_PORT"

fetch() {
  if [ ! -f "$ES_DIR/lib/.complete" ]; then
    command -v mvn >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >/dev/null; }
    log "resolving Elasticsearch $ES_VERSION from Maven Central"
    mkdir -p "$ES_DIR/lib"
    mvn -q -B -f "$ROOT/deploy/local/elasticsearch/pom.xml" dependency:copy-dependencies \
      -DoutputDirectory="$ES_DIR/lib" >"$ES_DIR/fetch.log" 2>&1 \
      || { tail -30 "$ES_DIR/fetch.log"; die "maven could not resolve elasticsearch-cluster-runner"; }
    touch "$ES_DIR/lib/.complete"
  fi
}

is_up() { curl -fsS -m 2 "$URL/_cluster/health" >/dev/null 2>&1; }

check_port() {
  # The runner exits without a word when its HTTP port is above 9299.
  if [ "$ES_HTTP_PORT" -lt 9201 ] || [ "$ES_HTTP_PORT" -gt 9299 ]; then
    die "DRIFTGAUGE_ES_PORT=$ES_HTTP_PORT: the Elasticsearch runner only serves HTTP on 9201-9299 (above 9299 it exits silently)"
  fi
  if [ "$ES_HTTP_PORT" -eq "$OS_HTTP_PORT" ]; then
    die "DRIFTGAUGE_ES_PORT=$ES_HTTP_PORT is OpenSearch's port (DRIFTGAUGE_OS_PORT): pick another in 9201-9299"
  fi
}

check_cluster_name() {
  local pid base
  for pid in $(pgrep -f "ElasticsearchClusterRunner.*-clusterName $ES_CLUSTER( |\$)" || true); do
    base=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | sed -n 's/.*-basePath \([^ ]*\).*/\1/p')
    if [ -n "$base" ] && [ "$base" != "$ES_DIR/base" ]; then
      die "another Elasticsearch runner (pid $pid, $base) uses cluster name $ES_CLUSTER; nodes with one name join each other: stop it or set DRIFTGAUGE_ES_CLUSTER and DRIFTGAUGE_ES_PORT"
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
  if is_up; then log "elasticsearch already up at $URL"; return 0; fi
  check_cluster_name
  mkdir -p "$ES_DIR/base"
  JAVA_BIN="${JAVA_HOME:+$JAVA_HOME/bin/}java"
  # XPackPlugin brings the point-in-time API (basic licence, security off).
  nohup "$JAVA_BIN" -Xms"$ES_HEAP" -Xmx"$ES_HEAP" -XX:+UseG1GC -Djava.awt.headless=true \
    -cp "$ES_DIR/lib/*" org.codelibs.elasticsearch.runner.ElasticsearchClusterRunner \
    -basePath "$ES_DIR/base" -numOfNode 1 -baseHttpPort "$BASE_PORT" -clusterName "$ES_CLUSTER" \
    -pluginTypes org.elasticsearch.xpack.core.XPackPlugin \
    >"$ES_DIR/elasticsearch.log" 2>&1 &
  echo $! >"$PIDFILE"
  # About 15 s on an idle 2-core machine, a minute when it is busy.
  for _ in $(seq 1 180); do
    if is_up; then
      relax_disk_watermarks
      # A red index left by a killed test must not stop the stack: say so and go on.
      if ! curl -fsS -m 40 "$URL/_cluster/health?wait_for_status=yellow&timeout=30s" >/dev/null; then
        log "warning: cluster not yellow after 30 s; red indices: $(curl -fsS -m 5 "$URL/_cat/indices?health=red&h=index" | tr '\n' ' ')"
      fi
      log "elasticsearch up at $URL"; return 0
    fi
    kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { tail -30 "$ES_DIR/elasticsearch.log"; die "elasticsearch exited during start"; }
    sleep 1
  done
  tail -30 "$ES_DIR/elasticsearch.log"; die "elasticsearch not ready after 180 s"
}

stop() {
  if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
    kill "$(cat "$PIDFILE")"
    for _ in $(seq 1 30); do kill -0 "$(cat "$PIDFILE")" 2>/dev/null || break; sleep 1; done
    kill -9 "$(cat "$PIDFILE")" 2>/dev/null || true
    rm -f "$PIDFILE"
    log "elasticsearch stopped"
  else
    log "elasticsearch not running"
  fi
}

status() {
  if is_up; then echo "elasticsearch: up at $URL ($ES_VERSION)"; else echo "elasticsearch: down"; return 3; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 start|stop|status|url" >&2; exit 2 ;;
esac
