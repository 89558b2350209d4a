#!/usr/bin/env bash
# Fails on an #include that runs the wrong way between src/ folders (docs/design.md, "Dependency rules").
# The allowed direction is read from ONE place, scripts/layers.txt. Usage:
#   scripts/check-includes.sh [ROOT [LAYERS]]   ROOT defaults to the repository, LAYERS to scripts/layers.txt
# Checks every ROOT/src/<folder>/*.{h,cc}: an include "B/..." from src/A is allowed when B is A or B is on a
# lower level; "gpuplan/..." (public headers) and <...> (system) are not checked. An include of a folder
# the table does not name, or a src/ folder the table does not name, is an error too (a new folder gets
# its line in layers.txt). Prints "file:line: A -> B (level a -> b) runs the wrong way" per finding.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="${1:-$here/..}"
layers="${2:-$here/layers.txt}"
[ -d "$root/src" ] || { echo "check-includes: no src/ folder under $root" >&2; exit 2; }
[ -r "$layers" ] || { echo "check-includes: cannot read $layers" >&2; exit 2; }

cd "$root"
status=0
find src -type f \( -name '*.h' -o -name '*.cc' \) | LC_ALL=C sort | xargs -r awk -v layers="$layers" '
  BEGIN {
    while ((getline line < layers) > 0) {
      sub(/#.*/, "", line)
      n = split(line, f, " ")
      if (n == 0) continue
      if (n != 2 || f[1] !~ /^[0-9]+$/) { printf "check-includes: bad line in %s: %s\n", layers, line; bad = 1; exit 2 }
      level[f[2]] = f[1] + 0
    }
    findings = 0
  }
  FNR == 1 {
    split(FILENAME, p, "/")
    from = p[2]
    if (!(from in level)) { printf "%s:1: folder src/%s has no line in %s\n", FILENAME, from, layers; findings++ }
  }
  /^[ \t]*#[ \t]*include[ \t]*"/ {
    inc = $0
    sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
    if (index(inc, "/") == 0) next
    to = substr(inc, 1, index(inc, "/") - 1)
    if (to == "gpuplan" || to == from || !(from in level)) next
    if (!(to in level)) {
      printf "%s:%d: %s -> %s: src/%s is not a layer in %s (\"%s\")\n", FILENAME, FNR, from, to, to, layers, inc
      findings++
    } else if (level[to] >= level[from]) {
      printf "%s:%d: %s -> %s (level %d -> %d) runs the wrong way: \"%s\"\n", FILENAME, FNR, from, to,
             level[from], level[to], inc
      findings++
    }
  }
  END {
    if (bad) exit 2
    if (findings > 0) { printf "check-includes: %d include(s) against %s\n", findings, layers; exit 1 }
  }
' || status=$?
# xargs reports any failing awk as 123: findings and a broken table both exit 1 here.
[ "$status" -eq 0 ] || exit 1
echo "check-includes: every include in $root/src runs down the layers of $layers"
