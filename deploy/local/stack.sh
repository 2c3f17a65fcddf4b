#!/usr/bin/env bash
# Start, stop or report the whole local stack (PostgreSQL, MariaDB, OpenSearch, Elasticsearch, Spark Connect, Trino).
# `start STORE...` starts only those (a demo needs PostgreSQL and OpenSearch, not Trino's 800 MB).
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
here="$(dirname "${BASH_SOURCE[0]}")"
STORES="postgres mariadb opensearch elasticsearch spark trino"
case "${1:-}" in
  start)
    shift
    for store in "$@"; do
      case " $STORES " in *" $store "*) ;; *) die "unknown store '$store' (one of: $STORES)" ;; esac
    done
    for store in ${*:-$STORES}; do "$here/$store.sh" start; done ;;
  stop) "$here/trino.sh" stop; "$here/spark.sh" stop; "$here/elasticsearch.sh" stop; "$here/opensearch.sh" stop; "$here/mariadb.sh" stop; "$here/postgres.sh" stop ;;
  status) rc=0; "$here/postgres.sh" status || rc=$?; "$here/mariadb.sh" status || rc=$?; "$here/opensearch.sh" status || rc=$?; "$here/elasticsearch.sh" status || rc=$?; "$here/spark.sh" status || rc=$?; "$here/trino.sh" status || rc=$?; exit $rc ;;
  env)
    # One place derives every address tests, benches and demos use (from the ports above);
    # a DRIFTGAUGE_TEST_* variable already set names its store and is kept.
    echo "export DRIFTGAUGE_TEST_PG_DSN=${DRIFTGAUGE_TEST_PG_DSN:-$("$here/postgres.sh" dsn)}"
    echo "export DRIFTGAUGE_TEST_MARIADB_DSN=${DRIFTGAUGE_TEST_MARIADB_DSN:-$("$here/mariadb.sh" dsn)}"
    echo "export DRIFTGAUGE_TEST_OS_URL=${DRIFTGAUGE_TEST_OS_URL:-$("$here/opensearch.sh" url)}"
    echo "export DRIFTGAUGE_TEST_ES_URL=${DRIFTGAUGE_TEST_ES_URL:-$("$here/elasticsearch.sh" url)}"
    echo "export DRIFTGAUGE_TEST_SPARK_URL=${DRIFTGAUGE_TEST_SPARK_URL:-$("$here/spark.sh" url)}"
    echo "export DRIFTGAUGE_TEST_TRINO_URL=${DRIFTGAUGE_TEST_TRINO_URL:-$("$here/trino.sh" url)}" ;;
  *) echo "usage: $0 start [STORE...]|stop|status|env" >&2; exit 2 ;;
esac
