#!/usr/bin/env bash
# Build cells_agg.so for bench/cell_cost.py --cells-agg against the local PostgreSQL.
#
# The server headers come from pg_config when installed; otherwise the Debian package
# of the same major version is downloaded and unpacked under .local (nothing is
# installed). The shared object is written to .local/cells_agg/cells_agg.so, and its
# path is the only line on stdout, so "$(bench/cells_agg/build.sh)" names it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
out="$top/.local/cells_agg"
mkdir -p "$out"
major=$(pg_config --version | sed -E 's/^PostgreSQL ([0-9]+).*/\1/')
inc=$(pg_config --includedir-server)
if [ ! -f "$inc/postgres.h" ]; then
  inc="$out/root/usr/include/postgresql/$major/server"
  if [ ! -f "$inc/postgres.h" ]; then
    echo "[cells_agg] no server headers at $(pg_config --includedir-server): unpacking postgresql-server-dev-$major under $out" >&2
    (cd "$out" && apt-get download "postgresql-server-dev-$major" >&2 && dpkg-deb -x postgresql-server-dev-"$major"_*.deb root)
  fi
fi
gcc -O2 -Wall -fPIC -shared -I"$inc" -I"$(pg_config --includedir)" -o "$out/cells_agg.so" "$here/cells_agg.c"
chmod -R a+rX "$out"
echo "$out/cells_agg.so"
