#!/usr/bin/env bash
# Start, stop or report a local Trino server (the release tarball, one node that is its own
# coordinator and worker), the engine of the trino kind; part of the local stack (stack.sh).
# Catalogs: memory (derived tables written through Trino), postgresql (the local PostgreSQL),
# hive (a file metastore on local files) and tpch (generated data for the bench).
# Usage: deploy/local/trino.sh start|stop|status|url   (see docs/trino.md)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

TRINO_VERSION="476"
TRINO_PORT="${DRIFTGAUGE_TRINO_PORT:-58080}"
TRINO_DIR="$LOCAL/trino"
TRINO_HOME="$TRINO_DIR/trino-server-$TRINO_VERSION"
TRINO_TARBALL="$LOCAL/downloads/trino-server-$TRINO_VERSION.tar.gz"
TRINO_JAVA_HOME="${DRIFTGAUGE_TRINO_JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}"
TRINO_HEAP="${DRIFTGAUGE_TRINO_HEAP:-1G}"
# A query's memory on the node: the first pass's distinct-key count holds a window's keys
# (~1 GB at 10M rows: see docs/trino.md). At most 70% of the heap: Trino keeps 30% as headroom.
TRINO_QUERY_MEMORY="${DRIFTGAUGE_TRINO_QUERY_MEMORY:-256MB}"
PIDFILE="$TRINO_DIR/trino.pid"
# Only this checkout's launcher and JVM name its Trino home on their command lines.
MARKER="$TRINO_HOME/"
URL="http://127.0.0.1:$TRINO_PORT"

ensure_java() {
  [ -x "$TRINO_JAVA_HOME/bin/java" ] \
    || die "Trino $TRINO_VERSION needs Java 24 or later: no java at $TRINO_JAVA_HOME/bin/java (set DRIFTGAUGE_TRINO_JAVA_HOME)"
  local major
  major="$("$TRINO_JAVA_HOME/bin/java" -XshowSettings:properties -version 2>&1 \
    | sed -n 's/^ *java.specification.version = //p')"
  [ "${major:-0}" -ge 24 ] 2>/dev/null \
    || die "Trino $TRINO_VERSION needs Java 24 or later; $TRINO_JAVA_HOME is Java ${major:-unknown}"
}

ensure_trino() {
  if [ ! -f "$TRINO_TARBALL" ]; then
    log "fetching trino-server $TRINO_VERSION with maven"
    mkdir -p "$LOCAL/downloads"
    (cd "$ROOT" && mvn -q dependency:copy -Dartifact="io.trino:trino-server:$TRINO_VERSION:tar.gz" \
      -DoutputDirectory="$LOCAL/downloads") || die "maven could not fetch trino-server $TRINO_VERSION"
  fi
  if [ ! -f "$TRINO_HOME/.complete" ]; then
    log "unpacking $TRINO_TARBALL into $TRINO_DIR"
    mkdir -p "$TRINO_DIR"
    tar -xzf "$TRINO_TARBALL" -C "$TRINO_DIR" || die "cannot unpack $TRINO_TARBALL"
    touch "$TRINO_HOME/.complete"
  fi
}

write_etc() {
  local etc="$TRINO_HOME/etc"
  mkdir -p "$etc/catalog" "$TRINO_DIR/data" "$TRINO_DIR/hive/warehouse" "$TRINO_DIR/hive/metastore"
  cat >"$etc/node.properties" <<PROPS
node.environment=local
node.id=driftgauge-local-trino
node.data-dir=$TRINO_DIR/data
PROPS
  cat >"$etc/jvm.config" <<PROPS
-server
-Xmx$TRINO_HEAP
-XX:+UseG1GC
-XX:+ExitOnOutOfMemoryError
-Djdk.attach.allowAttachSelf=true
PROPS
  cat >"$etc/config.properties" <<PROPS
coordinator=true
node-scheduler.include-coordinator=true
http-server.http.port=$TRINO_PORT
discovery.uri=http://127.0.0.1:$TRINO_PORT
query.max-memory=$TRINO_QUERY_MEMORY
query.max-memory-per-node=$TRINO_QUERY_MEMORY
PROPS
  echo "connector.name=memory" >"$etc/catalog/memory.properties"
  # Generated TPC-H tables (lineitem at scale 17 is ~100M rows): the scale bench's data.
  echo "connector.name=tpch" >"$etc/catalog/tpch.properties"
  cat >"$etc/catalog/postgresql.properties" <<PROPS
connector.name=postgresql
connection-url=jdbc:postgresql://127.0.0.1:$PG_PORT/postgres
connection-user=postgres
PROPS
  cat >"$etc/catalog/hive.properties" <<PROPS
connector.name=hive
hive.metastore=file
hive.metastore.catalog.dir=local://$TRINO_DIR/hive/metastore
fs.native-local.enabled=true
local.location=/
hive.timestamp-precision=MICROSECONDS
PROPS
}

is_up() { curl -fsS "$URL/v1/info" 2>/dev/null | grep -q '"starting":false'; }

start() {
  ensure_java
  ensure_trino
  if is_up; then log "trino already up at $URL"; return 0; fi
  write_etc
  # Every descriptor points away from the caller's (a caller reading our output would wait
  # for the server to exit), and setsid puts launcher and JVM in a group of their own.
  (cd "$TRINO_DIR" && JAVA_HOME="$TRINO_JAVA_HOME" PATH="$TRINO_JAVA_HOME/bin:$PATH" \
    exec setsid "$TRINO_HOME/bin/launcher" run --data-dir "$TRINO_DIR/data") \
    >"$TRINO_DIR/trino.log" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  # 60-120 s on a busy 2-core machine.
  for _ in $(seq 1 300); do
    if is_up; then log "trino up at $URL ($TRINO_VERSION)"; return 0; fi
    { kill -0 "$(cat "$PIDFILE")" 2>/dev/null || marked_alive "$MARKER"; } || { tail -30 "$TRINO_DIR/trino.log"; die "trino exited during start"; }
    sleep 1
  done
  tail -30 "$TRINO_DIR/trino.log"; die "trino not ready after 300 s"
}

stop() { stop_server trino "$PIDFILE" "$MARKER"; }

status() {
  if is_up; then echo "trino: up at $URL ($TRINO_VERSION)"; else echo "trino: down"; return 3; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 start|stop|status|url" >&2; exit 2 ;;
esac
