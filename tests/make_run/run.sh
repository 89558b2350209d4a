#!/bin/sh
# `make run` builds only what serving needs (issue #18): every build command it would run names the
# gpuplan target, so tests and benchmarks are not built before the server starts (`make test` and
# `make bench` build those). Usage: run.sh SOURCE_DIR BUILD_DIR
set -eu
src="$1"
build="$2"
plan=$(make -n -C "$src" run BUILD_DIR="$build") || { echo "make -n run failed"; exit 1; }
builds=$(printf '%s\n' "$plan" | grep -E '^cmake --build' || true)
if [ -z "$builds" ]; then
  echo "make run builds nothing:"; printf '%s\n' "$plan"; exit 1
fi
if printf '%s\n' "$builds" | grep -v -- '--target gpuplan$' >/dev/null; then
  echo "make run builds more than the gpuplan binary:"; printf '%s\n' "$builds"; exit 1
fi
echo "make run builds: $builds"
