#!/usr/bin/env bash
# The GPU check of issue #16 (docs/bench.md, "Measured on real GPUs"): builds gpuplan with the CUDA backend,
# measures the GPU (`bench --budget 170`), checks the file against the catalog (`bench check`), runs the
# `gpu`-labelled tests, and prints the wall time of each step. Run it on a machine with an NVIDIA GPU, the
# driver and the CUDA toolkit:  scripts/gpu-check.sh [BUILD_DIR] [OUT_DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build-gpu}"
out="${2:-$root/build-gpu/gpu-check}"
budget="${GPUPLAN_GPU_CHECK_BUDGET:-170}"
jobs="${JOBS:-$(nproc)}"
mkdir -p "$out"
t0=$(date +%s.%N)
step() { printf '== %s (%.1f s since start)\n' "$1" "$(echo "$(date +%s.%N) - $t0" | bc)"; }

step "configure (GPUPLAN_CUDA=ON)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPUPLAN_CUDA=ON -DGPUPLAN_BENCH=OFF >"$out/configure.log"
step "build gpuplan, the CUDA plugin and the tests"
cmake --build "$build" -j"$jobs" --target gpuplan gpuplan_tests >"$out/build.log"
ls -l "$build/libgpuplan_bench_cuda.so"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv || true

step "bench --budget $budget"
b0=$(date +%s.%N)
"$build/gpuplan" bench --budget "$budget" --out "$out/calibration.json" | tee "$out/bench.txt"
printf 'bench wall time: %.1f s (budget %s s)\n' "$(echo "$(date +%s.%N) - $b0" | bc)" "$budget"

step "bench check"
set +e
"$build/gpuplan" bench check "$out/calibration.json" | tee "$out/check.txt"
check_rc=${PIPESTATUS[0]}
set -e

step "ctest -L gpu"
(cd "$build" && ctest -L gpu --output-on-failure) | tee "$out/ctest.txt"
step "done (bench check exit $check_rc)"
exit "$check_rc"
