#!/usr/bin/env bash
# HTTP load benchmark of the market's reservations (docs/market.md, "Speed"): starts `gpuplan serve` on
# the store, then bench/load/market_load.cc (gpuplan_market_load) runs 1, 16 and 64 clients, each looping
# POST /api/v1/rentals + DELETE /api/v1/rentals/{id}, and prints reservations/s and p50/p99 latency.
# Not part of `make test`.
#   bench/market_load.sh sqlite [seconds per run]       SQLite file on a real disk (/var/tmp), synchronous=FULL
#   scripts/with-postgres.sh bench/market_load.sh postgresql [seconds]   a throwaway PostgreSQL 15
# Environment: BUILD (default build-bench: cmake -DGPUPLAN_BENCH=ON), PORT (18240), NODES (16 nodes of
# 8 dynamic-MIG A100s, i.e. 896 1g.10gb slices), CLIENTS (1,16,64), DIR (the SQLite data directory).
set -euo pipefail
cd "$(dirname "$0")/.."
STORE=${1:-sqlite}
DUR=${2:-5}
BUILD=${BUILD:-build-bench}
PORT=${PORT:-18240}
NODES=${NODES:-16}
CLIENTS=${CLIENTS:-1,16,64}
BIN=$BUILD/gpuplan
LOAD=$BUILD/bench/gpuplan_market_load
[ -x "$BIN" ] && [ -x "$LOAD" ] || {
  echo "build first: cmake -S . -B $BUILD -DGPUPLAN_BENCH=ON && cmake --build $BUILD --target gpuplan gpuplan_market_load" >&2
  exit 1
}

case "$STORE" in
  sqlite)
    DIR=${DIR:-$(mktemp -d /var/tmp/gpuplan-market-load.XXXXXX)}
    [ "$(stat -f -c %T "$DIR")" != tmpfs ] || echo "warning: $DIR is on tmpfs: fsync costs nothing there" >&2
    TARGET=$DIR
    SERVE=(--data-dir "$DIR")
    ;;
  postgresql)
    [ -n "${GPUPLAN_TEST_POSTGRES:-}" ] || { echo "run it under scripts/with-postgres.sh" >&2; exit 1; }
    # The conninfo "host=DIR port=P user=U dbname=D" as the URL `serve --database` takes.
    declare -A kv
    for pair in $GPUPLAN_TEST_POSTGRES; do kv[${pair%%=*}]=${pair#*=}; done
    TARGET="postgresql://${kv[user]}@/${kv[dbname]}?host=${kv[host]}&port=${kv[port]}"
    SERVE=(--database "$TARGET")
    ;;
  *) echo "store: sqlite or postgresql" >&2; exit 1 ;;
esac

"$BIN" serve --port "$PORT" "${SERVE[@]}" >/tmp/gpuplan-market-load-server.log 2>&1 &
SERVER=$!
cleanup() {
  kill "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
  if [ "$STORE" = sqlite ] && [ -z "${KEEP:-}" ]; then rm -rf "$DIR"; fi
}
trap cleanup EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/api/v1/health" >/dev/null && break; sleep 0.1; done

echo "# market reservations over HTTP: $STORE"
echo
echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), ${DUR} s per" \
  "run, server and clients on the same machine, $NODES nodes x 8 A100 (dynamic MIG), 1g.10gb slices."
echo
"$LOAD" --store "$TARGET" --port "$PORT" --clients "$CLIENTS" --seconds "$DUR" --nodes "$NODES"
