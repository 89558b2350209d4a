#!/usr/bin/env bash
# The GPU check of issue #16 (docs/bench.md, "Measured on real GPUs"): builds gpuplan with the CUDA backend,
# measures the GPU (`bench --budget 170`), checks the file against the catalog (`bench check`), runs the
# `gpu`-labelled tests (the bench's, and the agent's smoke test against nvidia-smi, scripts/gpu-smoke.py), and
# prints the wall time of each step. Run it on a machine with an NVIDIA GPU, the
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

step "agent smoke test: gpuplan agent --once --json against nvidia-smi (read-only; MIG mode untouched)"
set +e
python3 "$root/scripts/gpu-smoke.py" run --gpuplan "$build/gpuplan" | tee "$out/agent-smoke.txt"
smoke_rc=${PIPESTATUS[0]}
set -e

step "ctest -L gpu (bench_gpu, agent_gpu_smoke)"
(cd "$build" && ctest -L gpu --output-on-failure) | tee "$out/ctest.txt"
step "done (bench check exit $check_rc, agent smoke exit $smoke_rc)"
[ "$check_rc" -ne 0 ] && exit "$check_rc"
[ "$smoke_rc" -ne 0 ] && [ "$smoke_rc" -ne 77 ] && exit "$smoke_rc"
exit 0
