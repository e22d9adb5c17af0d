#!/usr/bin/env bash
# Builds what runs on a bare NVIDIA GPU machine (no GL loader, no apt, no network): the gpu/ tests
# and the kernel benchmarks, without gRPC, libstdc++/libgcc linked statically, into build-gpu/,
# with the few shared libraries they still need (Abseil, spdlog, fmt) copied into build-gpu/lib.
# Then fetches Debian's GL loader packages into .gl/ (see bench/nvidia/run.sh for the other side).
set -euo pipefail
cd "$(dirname "$0")/../.."
./deploy/install-deps.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGLIMPSE_GPU_ONLY=ON \
  -DGLIMPSE_STATIC_RUNTIME=ON
cmake --build build-gpu
mkdir -p build-gpu/lib
for bin in build-gpu/tests/gpu_tests build-gpu/bench/*_bench; do
  ldd "$bin" | awk '/=> \// {print $3}' | grep -vE '/(libc|libm|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
    xargs -r -I{} cp -uL {} build-gpu/lib/
done
if [ ! -d .gl ]; then
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  # shellcheck disable=SC2086
  apt-get $o update -q
  # shellcheck disable=SC2086
  (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
du -sh build-gpu .gl
