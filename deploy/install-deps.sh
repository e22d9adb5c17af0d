#!/usr/bin/env bash
# Installs what Glimpse needs to build, test and run, from Debian 12 packages only.
# Used by the README, .ci/run and deploy/Dockerfile. Quick when everything is already there.
#   deploy/install-deps.sh            build + test + run dependencies
#   deploy/install-deps.sh --runtime  only what the server needs at run time (container images)
set -euo pipefail

build_pkgs=(
  cmake ninja-build g++ pkg-config git ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  python3 python3-glad python3-yaml
  libegl-dev libegl1 libegl-mesa0 libgl1-mesa-dri
  libspdlog-dev libfmt-dev libabsl-dev libstb-dev googletest libgtest-dev
  libhiredis-dev redis-server
)
runtime_pkgs=(
  libegl1 libegl-mesa0 libgl1-mesa-dri libgrpc++1.51 libgrpc29 libprotobuf32
  libabsl20220623 libspdlog1.10 libfmt9 libhiredis0.14 ca-certificates
)

pkgs=("${build_pkgs[@]}")
[ "${1:-}" = "--runtime" ] && pkgs=("${runtime_pkgs[@]}")

missing=()
for p in "${pkgs[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages already installed"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: run as root or install sudo" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
