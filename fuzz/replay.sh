#!/usr/bin/env bash
# Runs a libFuzzer binary once over every file in the given folders (seed corpus, saved regressions),
# one process per file so that every failing input is named, not only the first.
# Usage: replay.sh FUZZER DIR...   Exits non-zero when any input crashes, leaks or times out.
set -uo pipefail
bin="$1"
shift
files=()
for dir in "$@"; do
  [ -d "$dir" ] || continue
  while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$dir" -type f ! -name '*.md' -print0 | sort -z)
done
echo "replaying ${#files[@]} inputs through $(basename "$bin")"
failed=()
for f in "${files[@]}"; do
  if ! out="$("$bin" -rss_limit_mb=2048 -timeout=10 "$f" 2>&1)"; then
    failed+=("$f")
    echo "FAIL $f"
    echo "$out" | grep -E 'runtime error|ERROR:|what\(\)|fuzz oracle|SUMMARY' | head -5
  fi
done
echo "$((${#files[@]} - ${#failed[@]})) passed, ${#failed[@]} failed"
[ "${#failed[@]}" -eq 0 ]
