#!/usr/bin/env bash
# Installs the Debian packages gpuplan builds and tests with, and the browser tests' npm package.
# Idempotent and quiet when nothing is missing. Why each one: see CONTRIBUTING.md ("Dependencies").
#   --bench   also wrk, for bench/load.sh (not needed by `make test`)
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(g++ cmake ninja-build make pkg-config nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
          libcpp-httplib-dev libgtest-dev libgmock-dev libbenchmark-dev glpk-utils chromium ccache
          clang libclang-rt-dev clang-tidy libsqlite3-dev libpq-dev postgresql-15 libssl-dev slurm-wlm munge)
# Node may come from Debian or elsewhere (NodeSource's nodejs conflicts with Debian's npm): install
# Debian's only when the commands are missing.
command -v node >/dev/null 2>&1 || packages+=(nodejs)
command -v npm >/dev/null 2>&1 || packages+=(npm)
if [ "${1:-}" = "--bench" ]; then packages+=(wrk); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The browser tests drive Debian's chromium with playwright-core (no browser download: the package
# is the driver only). Installed from the committed lock file, once.
if [ ! -d tests/web/node_modules/playwright-core ]; then
  echo "installing the browser tests' npm packages (tests/web)"
  (cd tests/web && npm ci --no-audit --no-fund --loglevel=error)
fi
