#!/usr/bin/env bash
# Start, stop or report a project-local PostgreSQL 15 cluster (run as the postgres user).
# Usage: deploy/local/postgres.sh start|stop|status|dsn
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

ensure_binaries() {
  if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/initdb" ]; then
    log "PostgreSQL 15 server not found; installing Debian's postgresql-15"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null
    PG_BIN=/usr/lib/postgresql/15/bin
  fi
}

is_up() { "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT"; }

start() {
  ensure_binaries
  mkdir -p "$LOCAL"
  if [ ! -s "$PG_DIR/PG_VERSION" ]; then
    log "initialising cluster in $PG_DIR"
    mkdir -p "$PG_DIR"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$PG_DIR"
    chmod 700 "$PG_DIR"
    as_pg "$PG_BIN/initdb" -D "$PG_DIR" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$LOCAL/pg-initdb.log" 2>&1 \
      || { tail -20 "$LOCAL/pg-initdb.log"; die "initdb failed"; }
    cat >>"$PG_DIR/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$PG_DIR'
max_connections = 200
shared_buffers = 256MB
work_mem = 32MB
fsync = off
synchronous_commit = off
full_page_writes = off
CONF
  fi
  if is_up; then log "postgres already up on 127.0.0.1:$PG_PORT"; return 0; fi
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR" -l "$PG_DIR/server.log" -w -t 60 start >/dev/null \
    || { tail -30 "$PG_DIR/server.log"; die "postgres did not start"; }
  is_up || { tail -30 "$PG_DIR/server.log"; die "postgres not ready"; }
  log "postgres up on 127.0.0.1:$PG_PORT"
}

stop() {
  ensure_binaries
  if [ -s "$PG_DIR/PG_VERSION" ] && is_up; then
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR" -m fast -w stop >/dev/null
    log "postgres stopped"
  else
    log "postgres not running"
  fi
}

status() {
  ensure_binaries
  if is_up; then echo "postgres: up on 127.0.0.1:$PG_PORT"; else echo "postgres: down"; return 3; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  dsn) echo "postgresql://postgres@127.0.0.1:$PG_PORT/postgres" ;;
  *) echo "usage: $0 start|stop|status|dsn" >&2; exit 2 ;;
esac
