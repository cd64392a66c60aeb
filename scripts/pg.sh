# shellcheck shell=bash
# Sourced by scripts/test.sh: a throwaway PostgreSQL cluster for the tests.
#
#   pg_start   sets MAILROOM_TEST_POSTGRES to a fresh cluster on a free local
#              port (keeps a MAILROOM_TEST_POSTGRES already set: your server)
#   pg_stop    stops and removes the cluster pg_start made
#
# The server binaries come from Debian's postgresql package
# (/usr/lib/postgresql/<version>/bin; .ci/run installs it). initdb refuses to
# run as root, so as root the cluster belongs to the postgres user.

PG_DIR=""

pg_bin() {
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
  done
  command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return 0; }
  return 1
}

pg_as() { # runs a command as the cluster's owner
  if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi
}

pg_free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

pg_start() {
  if [ -n "${MAILROOM_TEST_POSTGRES:-}" ]; then
    echo "postgres: using MAILROOM_TEST_POSTGRES from the environment"
    return 0
  fi
  local bin port
  bin=$(pg_bin) || { echo "postgres: no PostgreSQL server binaries (apt-get install postgresql, or set MAILROOM_TEST_POSTGRES=postgres://...)" >&2; return 1; }
  PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/mailroom-pg.XXXXXX")
  chmod 755 "$PG_DIR"
  [ "$(id -u)" = 0 ] && chown postgres "$PG_DIR"
  pg_as "'$bin/initdb' -D '$PG_DIR/data' -U postgres -A trust --no-sync" >"$PG_DIR/initdb.log" 2>&1 \
    || { cat "$PG_DIR/initdb.log" >&2; return 1; }
  local attempt
  for attempt in 1 2 3; do
    port=$(pg_free_port)
    # fsync off: a test cluster that dies is thrown away anyway.
    if pg_as "'$bin/pg_ctl' -D '$PG_DIR/data' -l '$PG_DIR/log' -w -t 60 start \
        -o \"-p $port -k '$PG_DIR' -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300\"" >/dev/null; then
      export MAILROOM_TEST_POSTGRES="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
      echo "postgres: throwaway cluster $("$bin/postgres" --version | awk '{print $3}') at 127.0.0.1:$port ($PG_DIR)"
      return 0
    fi
  done
  cat "$PG_DIR/log" >&2
  return 1
}

pg_stop() {
  [ -n "$PG_DIR" ] || return 0
  local bin; bin=$(pg_bin)
  pg_as "'$bin/pg_ctl' -D '$PG_DIR/data' -m fast -w stop" >/dev/null 2>&1 || true
  rm -rf "$PG_DIR"
  PG_DIR=""
}
