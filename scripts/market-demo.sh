#!/usr/bin/env bash
# `make run`: the server with the page, the API and a market on a local data directory holding a small
# DEMO inventory (provider tenant "demo-provider": its offers answer "demo": true), and prints a
# renter's and a provider's token so that a newcomer rents a MIG slice within a minute:
#   scripts/market-demo.sh BUILD/gpuplan [HOST] [PORT] [DATA_DIR]
# The first run initialises DATA_DIR (default .gpuplan-demo/) and writes the tokens to DATA_DIR/demo-tokens
# (mode 600); later runs reuse them. Delete the folder to start over. Ctrl-C stops the server.
# GPUPLAN_DEMO_SLURM=1 (with slurm-wlm installed): the demo runs inside scripts/with-slurm.sh, and a first
# run adds a Slurm-managed node (region demo-slurm, one A100 as 2 x 3g.40gb) whose rentals become
# holding jobs: `gpuplan rentals access ID` prints the srun line.
set -euo pipefail
if [ "${GPUPLAN_DEMO_SLURM:-}" = "1" ] && [ -z "${GPUPLAN_TEST_SLURM:-}" ] && [ -x /usr/sbin/slurmctld ]; then
  exec "$(dirname "$0")/with-slurm.sh" "$0" "$@"
fi
gpuplan="${1:?usage: $0 path/to/gpuplan [HOST] [PORT] [DATA_DIR]}"
host="${2:-127.0.0.1}"
port="${3:-8080}"
dir="${4:-.gpuplan-demo}"
url="http://$host:$port"
# Seconds to wait for the server to answer /api/v1/health after it starts.
start_wait_seconds=30

mkdir -p "$dir"
chmod 700 "$dir"
tokens="$dir/demo-tokens"

first_id() { sed -n 's/^ *"id": "\([^"]*\)".*/\1/p' | head -1; }
json_value() { sed -n "s/^ *\"$1\": \"\\([^\"]*\\)\".*/\\1/p" | head -1; }

if [ ! -f "$dir/admin-token" ]; then
  "$gpuplan" admin init --data-dir "$dir" --json | json_value token >"$dir/admin-token.new"
  mv "$dir/admin-token.new" "$dir/admin-token"
  chmod 600 "$dir/admin-token"
fi

"$gpuplan" serve --data-dir "$dir" --host "$host" --port "$port" &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null' EXIT
trap 'exit 130' INT TERM
for _ in $(seq 1 $((start_wait_seconds * 10))); do
  if "$gpuplan" offers list --server "$url" --json >/dev/null 2>&1; then break; fi
  kill -0 "$server" 2>/dev/null || { echo "market-demo: the server did not start" >&2; exit 1; }
  sleep 0.1
done

if [ ! -f "$tokens" ]; then
  export GPUPLAN_SERVER="$url"
  GPUPLAN_TOKEN="$(cat "$dir/admin-token")"
  export GPUPLAN_TOKEN
  provider=$("$gpuplan" --json tenants create demo-provider --kind provider | first_id)
  puser=$("$gpuplan" --json tenants add-user "$provider" --name demo-ops --role admin | first_id)
  ptoken=$("$gpuplan" --json tokens create --user-id "$puser" | json_value token)
  renter=$("$gpuplan" --json tenants create demo-renter --kind renter | first_id)
  ruser=$("$gpuplan" --json tenants add-user "$renter" --name demo-user --role member | first_id)
  rtoken=$("$gpuplan" --json tokens create --user-id "$ruser" | json_value token)
  # The demo inventory: one 8-GPU NVLink node of A100-80GB with dynamic MIG, one 2-GPU PCIe node of H100.
  a100=()
  for i in 0 1 2 3 4 5 6 7; do a100+=(--gpu "a100-80gb-sxm4:GPU-DEMO-A100-000$i:dynamic"); done
  GPUPLAN_TOKEN="$ptoken" "$gpuplan" --json nodes add --name demo-a100-node --region demo-eu --interconnect nvlink \
    --vcpus 128 --ram-gb 1024 --disk-gb 8000 "${a100[@]}" >/dev/null
  GPUPLAN_TOKEN="$ptoken" "$gpuplan" --json nodes add --name demo-h100-node --region demo-eu --interconnect pcie \
    --vcpus 64 --ram-gb 512 --disk-gb 4000 --gpu h100-80gb-pcie:GPU-DEMO-H100-0000:none \
    --gpu h100-80gb-pcie:GPU-DEMO-H100-0001:none >/dev/null
  if [ "${GPUPLAN_DEMO_SLURM:-}" = "1" ] && [ -n "${GPUPLAN_TEST_SLURM:-}" ]; then
    GPUPLAN_TOKEN="$ptoken" "$gpuplan" --json nodes add --name demo-slurm-node --region demo-slurm \
      --scheduler slurm --slurm-partition "$GPUPLAN_TEST_SLURM_PARTITION" --slurm-node "$GPUPLAN_TEST_SLURM_NODE" \
      --vcpus 8 --ram-gb 64 --disk-gb 100 --gpu "a100-80gb-sxm4:GPU-DEMO-SLURM-0000:static:3g.40gb@0,3g.40gb@4" \
      >/dev/null
    GPUPLAN_TOKEN="$ptoken" "$gpuplan" --json offers create --target a100-80gb-sxm4/3g.40gb --region demo-slurm \
      --price-per-hour 1.10 >/dev/null
  fi
  for offer in "a100-80gb-sxm4/1g.10gb 0.35" "a100-80gb-sxm4/3g.40gb 1.10" "a100-80gb-sxm4 1.90" "h100-80gb-pcie 2.49"; do
    set -- $offer
    GPUPLAN_TOKEN="$ptoken" "$gpuplan" --json offers create --target "$1" --region demo-eu --price-per-hour "$2" \
      >/dev/null
  done
  umask 077
  printf 'renter %s\nprovider %s\n' "$rtoken" "$ptoken" >"$tokens"
fi

rtoken=$(sed -n 's/^renter //p' "$tokens")
ptoken=$(sed -n 's/^provider //p' "$tokens")
slice=$("$gpuplan" --json offers list --server "$url" --source market |
  awk '/"id":/ {id=$2} /"target": "a100-80gb-sxm4\/1g.10gb"/ {gsub(/[",]/, "", id); print id; exit}')
cat <<EOF

gpuplan with a DEMO market (demo-provider's inventory is demo data: "demo": true) on $dir/
  page and API:   $url/        (API under /api/v1; the market's endpoints in /api/v1/openapi.json)
  renter token:   $rtoken
  provider token: $ptoken

Rent a 1g.10gb MIG slice now (in another terminal):
  export GPUPLAN_SERVER=$url GPUPLAN_TOKEN=$rtoken
  $gpuplan offers list --server $url
  $gpuplan rent ${slice:-OFFER_ID} --hours 1
  $gpuplan rentals list
Ctrl-C stops the server; the data stays in $dir/ (delete it to start over).
EOF
if [ "${GPUPLAN_DEMO_SLURM:-}" = "1" ] && [ -n "${GPUPLAN_TEST_SLURM:-}" ]; then
  cat <<EOF
Slurm (GPUPLAN_DEMO_SLURM=1): rent the demo-slurm 3g.40gb offer; within a second or two it is a running
holding job named gpuplan-r<id>-g<gen>, and "$gpuplan rentals access ID" prints its srun line.
  SLURM_CONF=$SLURM_CONF squeue
EOF
fi
wait "$server"
