#!/usr/bin/env bash
# Load benchmark of `gpuplan serve` on loopback with wrk: requests/s and p50/p99 latency at 1, 16 and
# 256 connections for catalog and fit requests, then a stream of malformed requests alongside valid
# load, then valid load beside 300 slowloris connections (a header byte a second); the server's RSS
# before and after, and whether it still answers. Not part of `make test`. To compare with another
# build (e.g. main before issue #11): PORT=18232 bench/load.sh /path/to/that/gpuplan
#   bench/load.sh [build/gpuplan] [seconds per run]      (installs wrk with scripts/install-deps.sh --bench)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build/gpuplan}
DUR=${2:-5}
PORT=${PORT:-18231}
command -v wrk >/dev/null 2>&1 || ./scripts/install-deps.sh --bench
[ -x "$BIN" ] || { echo "build first: make build" >&2; exit 1; }
BASE="http://127.0.0.1:$PORT"

"$BIN" serve --port "$PORT" >/tmp/gpuplan-load-server.log 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -sf "$BASE/api/v1/health" >/dev/null && break; sleep 0.1; done
rss() { awk '/VmRSS/ {print $2 " kB"}' "/proc/$SERVER/status"; }
have() { curl -s "$BASE/api/v1/health" | grep -q "\"$1\""; }

echo "# gpuplan serve load benchmark"
echo
echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), wrk $(wrk -v 2>&1 | head -1 | awk '{print $2}'), ${DUR} s per run, server and wrk on the same machine."
echo
echo "RSS after start: $(rss)"
# One warm-up so that lazily built tables are in place before the first measurement.
curl -s "$BASE/api/v1/gpus" >/dev/null
echo "RSS after warm-up: $(rss)"
echo

# run NAME METHOD PATH BODY CONNECTIONS
run() {
  local name=$1 method=$2 path=$3 body=$4 conns=$5
  local threads=$(( conns < 4 ? conns : 4 ))
  local out
  if [ "$method" = POST ]; then
    out=$(BODY="$body" wrk -t"$threads" -c"$conns" -d"${DUR}s" --latency -s bench/post.lua "$BASE$path" 2>&1)
  else
    out=$(wrk -t"$threads" -c"$conns" -d"${DUR}s" --latency "$BASE$path" 2>&1)
  fi
  local rps p50 p99 non2xx errors
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  non2xx=$(awk '/Non-2xx/ {print $5}' <<<"$out")
  errors=$(awk '/Socket errors/ {print $0}' <<<"$out" | sed 's/^ *Socket errors: //')
  printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$conns" "$rps" "$p50" "$p99" "${non2xx:-0}" "${errors:-none}"
}

echo "| request | connections | requests/s | p50 | p99 | non-2xx | socket errors |"
echo "|---|---:|---:|---:|---:|---:|---|"
for c in 1 16 256; do run "GET /api/v1/gpus (catalog.list)" GET /api/v1/gpus "" "$c"; done
for c in 1 16 256; do run "GET /api/v1/gpus/h100-80gb-sxm5 (catalog.show)" GET /api/v1/gpus/h100-80gb-sxm5 "" "$c"; done
for c in 1 16 256; do run "POST /api/v1/compare (3 GPUs)" POST /api/v1/compare '{"gpu": ["a100-40gb-sxm4", "h100-80gb-sxm5", "a40"]}' "$c"; done
if have fit; then
  FIT='{"model": "llama-2-7b", "weights": "bf16", "gpu": ["a100-40gb-sxm4", "h100-80gb-sxm5"], "batch": 4, "context": 4096}'
  for c in 1 16 256; do run "POST /api/v1/fit (llama-2-7b, 2 GPUs)" POST /api/v1/fit "$FIT" "$c"; done
else
  echo "| POST /api/v1/fit | - | not in this build | | | | |"
fi
for c in 16 256; do run "POST malformed JSON (expect 400)" POST /api/v1/compare '{"gpu": [' "$c"; done
echo
echo "RSS after the runs above: $(rss)"

# Malformed and hostile requests alongside valid load: the valid load must keep its 2xx answers.
echo
echo "Valid load with a concurrent stream of malformed requests (both at 64 connections):"
echo
echo "| request | connections | requests/s | p50 | p99 | non-2xx | socket errors |"
echo "|---|---:|---:|---:|---:|---:|---|"
BODY='{"gpu": [' wrk -t2 -c64 -d"${DUR}s" -s bench/post.lua "$BASE/api/v1/compare" >/tmp/gpuplan-load-bad.txt 2>&1 &
BAD=$!
( head -c 2000000 /dev/zero | tr '\0' 'a' >/tmp/gpuplan-load-big.txt
  end=$((SECONDS + DUR))
  while [ $SECONDS -lt $end ]; do
    curl -s -o /dev/null -X POST -H 'Content-Type: application/json' --data-binary @/tmp/gpuplan-load-big.txt "$BASE/api/v1/fit" || true
    curl -s -o /dev/null -X POST -H 'Content-Type: text/plain' -d '{}' "$BASE/api/v1/compare" || true
    printf 'GARBAGE\r\n\r\n' | timeout 1 bash -c "cat > /dev/tcp/127.0.0.1/$PORT" 2>/dev/null || true
  done ) &
HOSTILE=$!
run "GET /api/v1/gpus (during the malformed stream)" GET /api/v1/gpus "" 64
wait $BAD $HOSTILE || true
printf '| %s | %s | %s | | | %s | |\n' "POST malformed JSON (the stream)" 64 "$(awk '/Requests\/sec/ {print $2}' /tmp/gpuplan-load-bad.txt)" "$(awk '/Non-2xx/ {print $5}' /tmp/gpuplan-load-bad.txt)"
echo
echo "RSS after the malformed stream: $(rss)"

# Slowloris: 300 connections that send their headers one byte a second, while valid load runs.
echo
echo "Valid load while 300 connections trickle their headers one byte a second:"
echo
echo "| request | connections | requests/s | p50 | p99 | non-2xx | socket errors |"
echo "|---|---:|---:|---:|---:|---:|---|"
python3 - "$PORT" "$((DUR + 2))" <<'PY' &
import socket, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
conns = []
for _ in range(300):
    try:
        conns.append(socket.create_connection(("127.0.0.1", port), timeout=1))
    except OSError:
        pass
line = b"GET /api/v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 1000
end = time.time() + seconds
i = 0
while time.time() < end:
    for c in list(conns):
        try:
            c.send(line[i:i + 1] if i < len(line) else b"a")
        except OSError:
            conns.remove(c)
    i += 1
    time.sleep(1)
PY
SLOW=$!
sleep 1
run "GET /api/v1/gpus (during slowloris)" GET /api/v1/gpus "" 16
wait $SLOW || true
echo
echo "RSS after slowloris: $(rss)"

# Memory stays flat: the same load again must not grow the RSS beyond noise.
echo
echo "Second round (256 connections, fit or compare, then malformed):"
echo
echo "| request | connections | requests/s | p50 | p99 | non-2xx | socket errors |"
echo "|---|---:|---:|---:|---:|---:|---|"
if have fit; then run "POST /api/v1/fit (again)" POST /api/v1/fit "$FIT" 256
else run "POST /api/v1/compare (again)" POST /api/v1/compare '{"gpu": ["a100-40gb-sxm4", "a40"]}' 256; fi
run "POST malformed JSON (again)" POST /api/v1/compare '{"gpu": [' 256
echo
echo "RSS after the second round: $(rss)"
code=$(curl -s -o /dev/null -w '%{http_code}' "$BASE/api/v1/health")
echo "Health afterwards: HTTP $code"
[ "$code" = 200 ]
