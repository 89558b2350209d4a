#!/usr/bin/env bash
# Golden tests of the CLI's output. Each tests/golden/<name>.cmd holds the arguments (one line, shell
# words); <name>.out holds what the CLI printed: stdout, then stderr after a marker, then the exit
# status. Run with GPUPLAN_UPDATE_GOLDEN=1 to rewrite the .out files after an intended change.
set -u
bin="$1"
dir="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$dir/../.." && pwd)"
fail=0
n=0
for cmd in "$dir"/*.cmd; do
  name="$(basename "$cmd" .cmd)"
  expected="$dir/$name.out"
  actual="$(mktemp)"
  # shellcheck disable=SC2046
  (cd "$root" && eval "\"$bin\" $(cat "$cmd")" >"$actual.stdout" 2>"$actual.stderr"; echo $? >"$actual.rc")
  { cat "$actual.stdout"; echo "--- stderr"; cat "$actual.stderr"; echo "--- exit $(cat "$actual.rc")"; } >"$actual"
  n=$((n + 1))
  if [ "${GPUPLAN_UPDATE_GOLDEN:-0}" = 1 ]; then
    cp "$actual" "$expected"
  elif ! diff -u "$expected" "$actual" >"$actual.diff" 2>&1; then
    echo "FAIL $name"; head -40 "$actual.diff"; fail=$((fail + 1))
  fi
  rm -f "$actual" "$actual".*
done
echo "$((n - fail)) passed, $fail failed"
[ "$fail" -eq 0 ]
