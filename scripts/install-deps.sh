#!/usr/bin/env bash
# Installs the Debian packages gpuplan builds and tests with. Idempotent and quiet when nothing is
# missing. Why each one: see CONTRIBUTING.md ("Dependencies").
set -euo pipefail
packages=(g++ cmake ninja-build make pkg-config nlohmann-json3-dev libyaml-cpp-dev libcli11-dev
          libcpp-httplib-dev libgtest-dev libgmock-dev libbenchmark-dev glpk-utils)
if [ "${1:-}" = "--web" ]; then packages+=(chromium nodejs npm); fi
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
