#!/usr/bin/env bash
# Installs what Glimpse needs to build, test and run, from Debian 12 packages only.
# Used by the README, .ci/run and deploy/Dockerfile. Quick when everything is already there.
#   deploy/install-deps.sh            build + test + run dependencies
#   deploy/install-deps.sh --runtime  only what the server needs at run time (container images)
#   deploy/install-deps.sh --bench    build + test + run, and the peers of bench/peers.py (OpenCV)
#   deploy/install-deps.sh --image-test  what deploy/image-test.sh needs beyond the build: podman
#                                     (runc for cgroups v1 hosts; netavark and aardvark-dns, by
#                                     which compose services find each other by name, and
#                                     iptables, which netavark runs for every network but
#                                     Debian's netavark does not depend on), podman-compose,
#                                     debootstrap
set -euo pipefail

build_pkgs=(
  cmake ninja-build g++ pkg-config git ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  python3 python3-glad python3-yaml
  libegl-dev libegl1 libegl-mesa0 libgl1-mesa-dri
  libspdlog-dev libfmt-dev libabsl-dev libstb-dev googletest libgtest-dev
  prometheus-cpp-dev curl fonts-dejavu-core
  python3-venv python3-setuptools python3-wheel python3-grpcio python3-protobuf
  python3-numpy python3-pytest python3-pytest-asyncio python3-matplotlib
  libhiredis-dev redis-server libssl-dev openssl
  libturbojpeg0-dev libjpeg62-turbo-dev libspng-dev libwebp-dev libdeflate-dev
  clang-15 libfuzzer-15-dev clang-format-15
)
runtime_pkgs=(
  libegl1 libegl-mesa0 libgl1-mesa-dri libgrpc++1.51 libgrpc29 libprotobuf32
  libabsl20220623 libspdlog1.10 libfmt9 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0
  libhiredis0.14 libssl3
  libturbojpeg0 libspng0 libwebp7 libdeflate0
  ca-certificates
)

bench_pkgs=(python3-opencv)
image_test_pkgs=(podman runc netavark aardvark-dns iptables podman-compose debootstrap
                 python3-opencv python3-yaml)

pkgs=("${build_pkgs[@]}")
[ "${1:-}" = "--runtime" ] && pkgs=("${runtime_pkgs[@]}")
[ "${1:-}" = "--bench" ] && pkgs=("${build_pkgs[@]}" "${bench_pkgs[@]}")
[ "${1:-}" = "--image-test" ] && pkgs=("${image_test_pkgs[@]}")

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
