#!/usr/bin/env bash
# Start, stop or report a local Spark Connect server (pyspark's full distribution in its own
# venv), the engine of the spark kind; part of the local stack (stack.sh).
# Usage: deploy/local/spark.sh start|stop|status|url   (see docs/spark.md)
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

SPARK_VERSION="4.0.1"
SPARK_PORT="${DRIFTGAUGE_SPARK_PORT:-55002}"
SPARK_DIR="$LOCAL/spark"
SPARK_VENV="$LOCAL/spark-venv"
SPARK_MEMORY="${DRIFTGAUGE_SPARK_MEMORY:-1g}"
SPARK_JAVA_HOME="${DRIFTGAUGE_SPARK_JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}"
PIDFILE="$SPARK_DIR/spark.pid"
# Only this checkout's server names its warehouse directory on its command line.
MARKER="spark.sql.warehouse.dir=$SPARK_DIR/warehouse"
URL="sc://127.0.0.1:$SPARK_PORT"

ensure_java() {
  if [ ! -x "$SPARK_JAVA_HOME/bin/java" ]; then
    log "Java 17 not found at $SPARK_JAVA_HOME; installing Debian's openjdk-17-jre-headless"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null
  fi
  [ -x "$SPARK_JAVA_HOME/bin/java" ] || die "no java at $SPARK_JAVA_HOME/bin/java (set DRIFTGAUGE_SPARK_JAVA_HOME)"
}

ensure_spark() {
  if [ ! -f "$SPARK_VENV/.complete-$SPARK_VERSION" ]; then
    log "installing pyspark $SPARK_VERSION into $SPARK_VENV"
    mkdir -p "$SPARK_DIR"
    python3 -m venv "$SPARK_VENV"
    "$SPARK_VENV/bin/pip" install -q "pyspark==$SPARK_VERSION" >"$SPARK_DIR/install.log" 2>&1 \
      || { tail -30 "$SPARK_DIR/install.log"; die "pip could not install pyspark $SPARK_VERSION"; }
    touch "$SPARK_VENV/.complete-$SPARK_VERSION"
  fi
  SPARK_HOME="$("$SPARK_VENV/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
}

is_up() { (exec 3<>"/dev/tcp/127.0.0.1/$SPARK_PORT") 2>/dev/null; }

start() {
  ensure_java
  ensure_spark
  if is_up; then log "spark connect already up at $URL"; return 0; fi
  mkdir -p "$SPARK_DIR/warehouse"
  # Run from SPARK_DIR so the metastore and derby.log (if any) stay there; no UI port to collide on.
  # Every descriptor of the background job points away from the caller's (a caller reading our
  # output would otherwise wait for the server to exit), and exec makes its pid the server's.
  (cd "$SPARK_DIR" && JAVA_HOME="$SPARK_JAVA_HOME" SPARK_HOME="$SPARK_HOME" SPARK_LOCAL_IP=127.0.0.1 \
    exec setsid "$SPARK_HOME/bin/spark-submit" \
      --class org.apache.spark.sql.connect.service.SparkConnectServer \
      --name driftgauge-spark-connect --master 'local[2]' --driver-memory "$SPARK_MEMORY" \
      --conf spark.connect.grpc.binding.port="$SPARK_PORT" \
      --conf spark.connect.grpc.binding.address=127.0.0.1 \
      --conf spark.sql.warehouse.dir="$SPARK_DIR/warehouse" \
      --conf spark.driver.bindAddress=127.0.0.1 --conf spark.driver.host=127.0.0.1 \
      --conf spark.ui.enabled=false \
      --conf spark.sql.shuffle.partitions=4 \
  ) </dev/null >"$SPARK_DIR/spark.log" 2>&1 &
  echo $! >"$PIDFILE"
  # About 10 s on an idle 2-core machine, longer when it is busy.
  for _ in $(seq 1 180); do
    if is_up; then log "spark connect up at $URL ($SPARK_VERSION)"; return 0; fi
    { kill -0 "$(cat "$PIDFILE")" 2>/dev/null || marked_alive "$MARKER"; } || { tail -30 "$SPARK_DIR/spark.log"; die "spark connect exited during start"; }
    sleep 1
  done
  tail -30 "$SPARK_DIR/spark.log"; die "spark connect not listening after 180 s"
}

stop() { stop_server "spark connect" "$PIDFILE" "$MARKER"; }

status() {
  if is_up; then echo "spark: up at $URL ($SPARK_VERSION)"; else echo "spark: down"; return 3; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 start|stop|status|url" >&2; exit 2 ;;
esac
