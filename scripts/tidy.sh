#!/usr/bin/env bash
# clang-tidy-14 with the project's .clang-tidy on the src/ files a change touches: the .cc files that
# differ from BASE (default: git merge-base HEAD origin/main, else main), committed or not, and for a
# changed src/ header its sibling .cc; every src/*.cc with TIDY_ALL=1. Reads the compile commands
# CMake exports (CMAKE_EXPORT_COMPILE_COMMANDS, on in CMakeLists.txt) from BUILD_DIR (build). Runs
# JOBS (2) files at a time and fails when clang-tidy reports any finding, listing them.
#   scripts/tidy.sh                 # the files this branch touches
#   BASE=HEAD~3 scripts/tidy.sh     # the files of the last three commits
#   TIDY_ALL=1 scripts/tidy.sh      # every src/*.cc
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
TIDY="${CLANG_TIDY:-clang-tidy-14}"
JOBS="${JOBS:-2}"
db="$BUILD_DIR/compile_commands.json"
if [[ ! -f "$db" ]]; then
  echo "tidy: $db is missing: configure first (cmake -S . -B $BUILD_DIR -G Ninja)" >&2
  exit 2
fi
command -v "$TIDY" >/dev/null || { echo "tidy: $TIDY not found (apt-get install clang-tidy-14)" >&2; exit 2; }

if [[ "${TIDY_ALL:-0}" == 1 ]]; then
  mapfile -t files < <(git ls-files 'src/*.cc')
else
  base="${BASE:-$(git merge-base HEAD origin/main 2>/dev/null || git merge-base HEAD main)}"
  # On main itself (nothing between the merge base and HEAD) the change is the last commit.
  if [[ -z "${BASE:-}" && "$(git rev-parse "$base")" == "$(git rev-parse HEAD)" ]]; then
    base="$(git rev-parse --verify -q HEAD~1 || git hash-object -t tree /dev/null)"
  fi
  mapfile -t changed < <({ git diff --name-only --diff-filter=ACMR "$base" -- 'src/*.cc' 'src/*.h';
                           git ls-files --others --exclude-standard -- 'src/*.cc' 'src/*.h'; } | sort -u)
  files=()
  for f in "${changed[@]}"; do
    case "$f" in
      *.cc) files+=("$f") ;;
      *.h) [[ -f "${f%.h}.cc" ]] && files+=("${f%.h}.cc") ;;
    esac
  done
  mapfile -t files < <(printf '%s\n' "${files[@]}" | sort -u | sed '/^$/d')
fi
# Only files the build compiles (the compile database knows them).
todo=()
for f in "${files[@]}"; do
  grep -q "\"file\": \"$PWD/$f\"" "$db" && todo+=("$f")
done
if [[ ${#todo[@]} -eq 0 ]]; then
  echo "tidy: no src/ file to check"
  exit 0
fi
echo "tidy: ${#todo[@]} file(s) with $TIDY, $JOBS at a time"
start=$SECONDS
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
# g++'s warning flags in the database are unknown to clang: not findings.
printf '%s\n' "${todo[@]}" |
  xargs -P "$JOBS" -n 1 "$TIDY" -p "$BUILD_DIR" --quiet --extra-arg=-Wno-unknown-warning-option >"$out" 2>/dev/null || true
# A finding in a header shows once per file that includes it: count each place once.
# (grep finds nothing on a clean run: its status 1 must not end the script under pipefail.)
findings="$({ grep ': warning: \|: error: ' "$out" || true; } | sort -u | wc -l)"
echo "tidy: ${#todo[@]} file(s) in $((SECONDS - start)) s, $findings finding(s)"
if [[ "$findings" != 0 ]]; then
  grep ': warning: \|: error: ' "$out" | sort -u
  exit 1
fi
