#!/usr/bin/env bash
# Installs what gpuherd needs from Debian's packages (only what is missing) and
# builds it with CMake + Ninja into build/. Idempotent: a second run only
# rebuilds what changed. Sourced by scripts/run and scripts/test.
set -euo pipefail

GPUHERD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GPUHERD_BUILD="${GPUHERD_BUILD:-$GPUHERD_ROOT/build}"

GPUHERD_PACKAGES=(
  g++ cmake ninja-build pkg-config ccache python3 sqlite3 clang prometheus
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libsqlitecpp-dev libsqlite3-dev
  libspdlog-dev libfmt-dev libboost-dev libgtest-dev libgmock-dev libssl-dev
  chromium  # the dashboard's browser test (driven by playwright-core from npm)
  libxgboost-dev  # the failure-risk model
  slurm-wlm munge  # the Slurm backend's tests run a real slurmctld and slurmd
  libclang-rt-14-dev llvm-14  # libFuzzer and the sanitizers' runtimes, llvm-symbolizer (scripts/test-sanitize)
)

gpuherd_as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

gpuherd_install_packages() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "==> installing ${missing[*]}"
  # One update per machine run; apt's lists may be absent on a fresh image.
  if [ ! -f /tmp/.gpuherd-apt-updated ]; then
    gpuherd_as_root apt-get update -qq
    touch /tmp/.gpuherd-apt-updated
  fi
  gpuherd_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

gpuherd_build() {
  gpuherd_install_packages "${GPUHERD_PACKAGES[@]}"
  # npm fetches the report's charting library; a Node.js installed by other means counts.
  command -v npm >/dev/null || gpuherd_install_packages npm
  if [ ! -f "$GPUHERD_BUILD/build.ninja" ]; then
    cmake -S "$GPUHERD_ROOT" -B "$GPUHERD_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  echo "==> building in $GPUHERD_BUILD"
  cmake --build "$GPUHERD_BUILD" -- -j"$(nproc)" "$@"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  gpuherd_build
fi
