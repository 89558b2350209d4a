#!/usr/bin/env bash
# The build's compile step (gpuplan_compile_data, tools/compile_data.cc) over copies of data/: the
# shipped files pass; a copy with one bad figure, and one with a bad option type, fail with the
# loader's file:line error, so a broken data file fails the build, not the first run.
#   tests/compile_data/run.sh TOOL SOURCE_DIR
set -euo pipefail
tool="$1"
src="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fresh_copy() {
  rm -rf "$work/tree"
  mkdir -p "$work/tree"
  cp -r "$src/data" "$work/tree/data"
  (cd "$work/tree" && find "$PWD/data" -type f \( -name '*.yaml' -o -name '*.json' -o -name '*.csv' \) | sort) \
    >"$work/list.txt"
}

# Expect failure naming file:line; $1 = file, $2 = line, $3 = a phrase of the message.
expect_failure() {
  if "$tool" "$work/tree" "$work/list.txt" "$work/out.cc" 2>"$work/err.txt"; then
    echo "FAIL: the compile step accepted a broken $1"
    exit 1
  fi
  if ! grep -q "^gpuplan_compile_data: error: $1:$2: .*$3" "$work/err.txt"; then
    echo "FAIL: expected '$1:$2: ... $3', got:"
    cat "$work/err.txt"
    exit 1
  fi
  echo "ok: broken $1:$2 fails the compile step: $(cat "$work/err.txt")"
}

fresh_copy
"$tool" "$work/tree" "$work/list.txt" "$work/out.cc"
grep -q "catalog_image()" "$work/out.cc"
echo "ok: the shipped data/ compiles"

# A figure that is not a number.
fresh_copy
gpu_file=data/gpus/h100.yaml
line=$(grep -n -m1 'memory_gb: {value: 80,' "$work/tree/$gpu_file" | cut -d: -f1)
sed -i "${line}s/memory_gb: {value: 80,/memory_gb: {value: eighty,/" "$work/tree/$gpu_file"
expect_failure "$gpu_file" "$line" "expected a number in GB, got 'eighty'"

# An option of an unknown type.
fresh_copy
line=$(grep -n -m1 '^    type: int$' "$work/tree/data/options.yaml" | cut -d: -f1)
sed -i "${line}s/type: int/type: integr/" "$work/tree/data/options.yaml"
expect_failure data/options.yaml "$line" "unknown type 'integr'"
