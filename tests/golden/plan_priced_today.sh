#!/usr/bin/env bash
# Issue #18, done when: "`gpuplan plan` over the shipped snapshot answers 'A10 vs L4 vs A100 40GB vs a 3g.20gb
# slice for Llama-3-8B' with a price for each, on a clean clone, today." This runs exactly that question over the
# shipped snapshot with no --offers and no --now (staleness is measured at the day the test runs), and passes when
# each of the four targets has a priced plan row: the target's column followed by gpus, tp, pp, replicas, batch and
# a usd_h figure. A list price older than --max-age's 180 days is kept with a "may be stale" warning, so the test
# holds on any later day too; nothing else in it depends on the date. It also checks that the recommendation is a
# real offer, not the proxy row. Usage: plan_priced_today.sh <gpuplan>
set -u
bin="$1"
targets=(a10 l4 a100-40gb-sxm4 a100-40gb-sxm4/3g.20gb)
out="$("$bin" plan --model llama-3-8b --gpu "$(IFS=,; echo "${targets[*]}")" --rate 1 --top 1000 2>&1)"
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "gpuplan plan exited $rc:"; echo "$out"; exit 1
fi
fail=0
for t in "${targets[@]}"; do
  re="  ${t//./\\.}  +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+\.[0-9]+ "
  if row="$(grep -E -m1 -- "$re" <<<"$out")"; then
    echo "priced: $t: $row"
  else
    echo "NO PRICE for $t (no plan row of that target)"; fail=1
  fi
done
# The recommendation is a real offer: the 3g.20gb row is a proxy (a 20 GB share of an A100 80GB), which ranks
# after every real offer that meets the goal (it used to be recommended as the cheapest).
rec="$(grep -m1 '^Recommended:' <<<"$out")"
if [ -z "$rec" ] || grep -qi 'proxy' <<<"$rec"; then
  echo "the recommendation is not a real offer: ${rec:-none}"; fail=1
else
  echo "recommended: $rec"
fi
[ "$fail" -eq 0 ] || { echo "--- the plan's output:"; echo "$out"; }
exit "$fail"
