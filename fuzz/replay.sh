#!/usr/bin/env bash
# Runs a libFuzzer binary once over every file in the given folders (seed corpus, saved regressions).
# Usage: replay.sh FUZZER DIR...   Exits non-zero when any input crashes, leaks or times out.
set -euo pipefail
bin="$1"
shift
files=()
for dir in "$@"; do
  [ -d "$dir" ] || continue
  while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$dir" -type f ! -name '*.md' -print0 | sort -z)
done
if [ "${#files[@]}" -eq 0 ]; then
  echo "no inputs under $*"
  exit 0
fi
echo "replaying ${#files[@]} inputs through $(basename "$bin")"
exec "$bin" -rss_limit_mb=2048 -timeout=10 "${files[@]}"
