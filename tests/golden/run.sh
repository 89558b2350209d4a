#!/usr/bin/env bash
# Golden tests of the CLI's output. Each tests/golden/<name>.cmd holds the arguments (one line, shell
# words); <name>.out holds what the CLI printed: stdout, then stderr after a marker, then the exit
# status. Run with GPUPLAN_UPDATE_GOLDEN=1 to rewrite the .out files after an intended change.
# A .cmd runs in this script's shell from the repository root, so it may use $(mktemp -d) and name the
# binary again as "$bin" (the market's `admin init` twice on one data directory).
set -u
# The binary runs by the name `gpuplan` (a link on PATH), so that a help's "Usage: gpuplan ..." line does not
# depend on where the build is.
bindir="$(mktemp -d)"
trap 'rm -rf "$bindir"' EXIT
ln -s "$(realpath "$1")" "$bindir/gpuplan"
PATH="$bindir:$PATH"
bin=gpuplan
# The market commands read these; a golden must not depend on the caller's environment.
unset GPUPLAN_SERVER GPUPLAN_TOKEN
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
