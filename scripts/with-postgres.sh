#!/usr/bin/env bash
# Runs CMD with a throwaway PostgreSQL 15 (Debian's postgresql-15), for the market's store tests:
#   scripts/with-postgres.sh CMD [ARGS...]
# The cluster lives in a temporary folder, listens only on a Unix socket there (no TCP), keeps fsync on
# (the crash tests need real durability), trusts local connections (nothing else can reach the socket:
# the folder is private), and is stopped and removed when CMD ends, fails or is interrupted. CMD gets:
#   GPUPLAN_TEST_POSTGRES  a libpq conninfo ("host=<socket dir> port=... user=gpuplan dbname=postgres")
#   GPUPLAN_TEST_PGDATA    the data folder, for `scripts/with-postgres.sh --ctl stop-immediate|start`
#                          (the crash tests stop the server with `pg_ctl -m immediate` and start it again)
# initdb refuses to run as root, so as root (CI) the cluster runs as the unprivileged user `nobody`
# (runuser); as any other user it runs as that user. GPUPLAN_PG_BIN overrides the binaries' folder.
# When GPUPLAN_TEST_POSTGRES is already set, CMD runs against that server and nothing is started.
# Without postgresql-15 installed it fails (`make deps` installs it); GPUPLAN_WITHOUT_POSTGRES=1 runs CMD
# without PostgreSQL instead (the store tests then run on SQLite only).
set -euo pipefail

PG_BIN="${GPUPLAN_PG_BIN:-/usr/lib/postgresql/15/bin}"
# The socket file's name is .s.PGSQL.<port>; with no TCP listener the number only names the file.
PG_PORT=5432
# Connections the cluster accepts: ctest -j runs several test processes, each with a pool (32 at most,
# src/market/postgres_db.cc) and the 64-client load test; PostgreSQL's default is 100.
PG_MAX_CONNECTIONS=300
# The unprivileged user the cluster runs as when this script runs as root.
PG_USER_WHEN_ROOT=nobody

as_owner() {  # runs "$@" as the cluster's owner
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$PG_USER_WHEN_ROOT" -- "$@"
  else
    "$@"
  fi
}

pg_options() {
  echo "-c listen_addresses='' -c unix_socket_directories='$1' -c port=$PG_PORT -c fsync=on" \
       "-c max_connections=$PG_MAX_CONNECTIONS -c shared_buffers=64MB"
}

if [ "${1:-}" = "--ctl" ]; then
  # scripts/with-postgres.sh --ctl stop-immediate|start: for the crash tests, inside a run of this script.
  : "${GPUPLAN_TEST_PGDATA:?--ctl needs GPUPLAN_TEST_PGDATA (run inside scripts/with-postgres.sh)}"
  sock="$(dirname "$GPUPLAN_TEST_PGDATA")/sock"
  case "${2:-}" in
    stop-immediate) as_owner "$PG_BIN/pg_ctl" -D "$GPUPLAN_TEST_PGDATA" -m immediate -w stop >/dev/null ;;
    start) as_owner setsid "$PG_BIN/pg_ctl" -D "$GPUPLAN_TEST_PGDATA" -w -t 60 -l "$GPUPLAN_TEST_PGDATA/../log" \
             -o "$(pg_options "$sock")" start >/dev/null ;;
    *) echo "usage: $0 --ctl stop-immediate|start" >&2; exit 2 ;;
  esac
  exit 0
fi

if [ $# -eq 0 ]; then
  echo "usage: $0 CMD [ARGS...]   (runs CMD with a throwaway PostgreSQL; GPUPLAN_TEST_POSTGRES names it)" >&2
  exit 2
fi
if [ -n "${GPUPLAN_TEST_POSTGRES:-}" ]; then
  exec "$@"
fi
if [ ! -x "$PG_BIN/initdb" ]; then
  if [ "${GPUPLAN_WITHOUT_POSTGRES:-}" = "1" ]; then
    echo "with-postgres: no $PG_BIN/initdb; running without PostgreSQL (GPUPLAN_WITHOUT_POSTGRES=1)" >&2
    exec "$@"
  fi
  echo "with-postgres: $PG_BIN/initdb not found: install postgresql-15 (make deps), or set" \
       "GPUPLAN_WITHOUT_POSTGRES=1 to run the tests on SQLite only" >&2
  exit 1
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/gpuplan-pg.XXXXXX")"
data="$tmp/data"
sock="$tmp/sock"
mkdir -p "$data" "$sock"
chmod 700 "$tmp" "$data"
if [ "$(id -u)" -eq 0 ]; then
  chown -R "$PG_USER_WHEN_ROOT" "$tmp"
  chmod 711 "$tmp"  # root's test processes reach the socket; other users cannot list the folder
fi

started=0
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ "$started" = 1 ]; then
    as_owner "$PG_BIN/pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 ||
      as_owner "$PG_BIN/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
child=""
forward() {  # a signal to this script goes to CMD too, then the cluster is stopped (cleanup)
  [ -n "$child" ] && kill "-$1" "$child" 2>/dev/null
  wait "$child" 2>/dev/null
  exit "$2"
}

if ! as_owner "$PG_BIN/initdb" -D "$data" -U gpuplan --auth=trust --no-sync --encoding=UTF8 --locale=C.UTF-8 \
       >"$tmp/initdb.log" 2>&1; then
  echo "with-postgres: initdb failed:" >&2
  cat "$tmp/initdb.log" >&2
  exit 1
fi
started=1
# In a session of its own (setsid), so that Ctrl-C reaches CMD and this script, not the server: the
# cleanup then stops it in order.
if ! as_owner setsid "$PG_BIN/pg_ctl" -D "$data" -w -t 60 -l "$tmp/log" -o "$(pg_options "$sock")" start \
       >/dev/null; then
  echo "with-postgres: PostgreSQL did not start:" >&2
  cat "$tmp/log" >&2 || true
  exit 1
fi

export GPUPLAN_TEST_POSTGRES="host=$sock port=$PG_PORT user=gpuplan dbname=postgres"
export GPUPLAN_TEST_PGDATA="$data"
echo "with-postgres: PostgreSQL 15 on $sock (removed afterwards)" >&2
# CMD runs in the background with this script's stdin, so that a signal interrupts `wait` at once.
"$@" <&0 &
child=$!
trap 'forward INT 130' INT
trap 'forward TERM 143' TERM
set +e
wait "$child"
rc=$?
set -e
exit "$rc"
