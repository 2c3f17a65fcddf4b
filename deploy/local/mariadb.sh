#!/usr/bin/env bash
# Start, stop or report a project-local MariaDB server (never the system service).
# Usage: deploy/local/mariadb.sh start|stop|status|dsn
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
MY_SOCK="$MY_DIR/mariadb.sock"
MY_LOG="$MY_DIR/server.log"

ensure_binaries() {
  if ! command -v mariadbd >/dev/null && [ ! -x /usr/sbin/mariadbd ]; then
    log "MariaDB server not found; installing Debian's mariadb-server"
    # policy-rc.d keeps the package from starting the system service.
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends mariadb-server >/dev/null
  fi
}

client() { mariadb --protocol=socket -S "$MY_SOCK" -u root "$@"; }
is_up() { [ -S "$MY_SOCK" ] && mariadb-admin --protocol=socket -S "$MY_SOCK" -u root ping >/dev/null 2>&1; }

start() {
  ensure_binaries
  mkdir -p "$MY_DIR"
  local user; user="$(id -un)"
  if [ "$(id -u)" = 0 ]; then
    # As root, run as mysql when it can reach the data directory (a checkout under a
    # private home cannot be), else as root, which mariadbd allows when told explicitly.
    if id mysql >/dev/null 2>&1 && runuser -u mysql -- test -x "$MY_DIR" 2>/dev/null; then
      user=mysql
    else
      user=root
    fi
    chown "$user": "$MY_DIR"
  fi
  if [ ! -d "$MY_DIR/data/mysql" ]; then
    log "initialising MariaDB data in $MY_DIR/data"
    mariadb-install-db --user="$user" --datadir="$MY_DIR/data" --auth-root-authentication-method=socket \
      --skip-test-db >"$MY_DIR/install-db.log" 2>&1 || { tail -20 "$MY_DIR/install-db.log"; die "mariadb-install-db failed"; }
  fi
  if is_up; then log "mariadb already up on 127.0.0.1:$MY_PORT"; return 0; fi
  # --no-defaults: the system's /etc/mysql settings (its port, socket, datadir) never apply.
  nohup /usr/sbin/mariadbd --no-defaults --user="$user" --datadir="$MY_DIR/data" \
    --bind-address=127.0.0.1 --port="$MY_PORT" --socket="$MY_SOCK" --pid-file="$MY_DIR/mariadbd.pid" \
    --log-error="$MY_LOG" --skip-name-resolve --character-set-server=utf8mb4 \
    --collation-server=utf8mb4_bin --default-time-zone=+00:00 --innodb-buffer-pool-size=256M \
    --innodb-flush-log-at-trx-commit=0 --max-connections=300 >/dev/null 2>&1 &
  for _ in $(seq 1 60); do is_up && break; sleep 0.5; done
  is_up || { tail -30 "$MY_LOG" 2>/dev/null; die "mariadb did not start within 30 s"; }
  if [ ! -f "$MY_DIR/tz-loaded" ]; then
    # Buckets are days in a check's zone: CONVERT_TZ needs the zone tables (DST rules).
    mariadb-tzinfo-to-sql /usr/share/zoneinfo 2>/dev/null | client mysql \
      || { tail -30 "$MY_LOG"; die "loading the time zone tables failed"; }
    touch "$MY_DIR/tz-loaded"
  fi
  # Tests and the example connect over TCP as root without a password (local only).
  client -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;" \
    || { tail -30 "$MY_LOG"; die "creating the TCP user failed"; }
  log "mariadb up on 127.0.0.1:$MY_PORT"
}

stop() {
  if is_up; then
    mariadb-admin --protocol=socket -S "$MY_SOCK" -u root shutdown
    log "mariadb stopped"
  else
    log "mariadb not running"
  fi
}

status() {
  if is_up; then echo "mariadb: up on 127.0.0.1:$MY_PORT"; else echo "mariadb: down"; return 3; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  dsn) echo "mysql://root@127.0.0.1:$MY_PORT/mysql" ;;
  *) echo "usage: $0 start|stop|status|dsn" >&2; exit 2 ;;
esac
