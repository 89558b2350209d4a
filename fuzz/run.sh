#!/usr/bin/env bash
# Runs every libFuzzer target for FUZZ_SECONDS (default 60), JOBS at a time, starting from the seed
# corpus in fuzz/corpus/<target>/. New inputs go to BUILD/corpus/<target>/ (the seeds in git stay as
# they are); a crash's input goes to BUILD/artifacts/<target>/ and fails the run.
# Usage: fuzz/run.sh BUILD_DIR [TARGET...]    (BUILD_DIR: a GPUPLAN_FUZZ=ON clang build, `make fuzz-build`)
set -uo pipefail
build="${1:?usage: fuzz/run.sh BUILD_DIR [TARGET...]}"
shift
here="$(cd "$(dirname "$0")" && pwd)"
seconds="${FUZZ_SECONDS:-60}"
jobs="${JOBS:-2}"
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  # Every target the build made (fuzz/CMakeLists.txt's list; fuzz_pg_placeholders only with libpq's
  # headers). The list was once written here too and fell 7 targets behind the CMake list.
  for f in "$build"/fuzz/fuzz_*; do
    [ -f "$f" ] && [ -x "$f" ] && targets+=("$(basename "$f")")
  done
  if [ "${#targets[@]}" -eq 0 ]; then
    echo "fuzz/run.sh: no fuzz_* targets in $build/fuzz (run make fuzz-build first)" >&2
    exit 2
  fi
fi
# Memory per process and per input: far above what any seed needs, far below the CI machine's memory.
rss_limit_mb=2048
input_timeout_seconds=10

run_one() {
  local t="$1" bin="$build/fuzz/$1"
  mkdir -p "$build/corpus/$t" "$build/artifacts/$t"
  local dict=()
  [ -f "$here/dict/$t.dict" ] && dict=(-dict="$here/dict/$t.dict")
  "$bin" -max_total_time="$seconds" -rss_limit_mb="$rss_limit_mb" -timeout="$input_timeout_seconds" \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$t/" "${dict[@]}" \
    "$build/corpus/$t" "$here/corpus/$t" >"$build/artifacts/$t.log" 2>&1
  local rc=$?
  local execs
  execs="$(grep -E 'stat::number_of_executed_units' "$build/artifacts/$t.log" | awk '{print $2}')"
  echo "$t: exit $rc, ${execs:-?} inputs in ${seconds} s ($(( ${execs:-0} / seconds )) exec/s), corpus $(ls "$build/corpus/$t" | wc -l) files"
  if [ "$rc" -ne 0 ]; then
    echo "$t: FAILED, last lines of $build/artifacts/$t.log:"
    tail -40 "$build/artifacts/$t.log"
    ls "$build/artifacts/$t/"
  fi
  return "$rc"
}
export -f run_one
export build here seconds rss_limit_mb input_timeout_seconds

printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}'
