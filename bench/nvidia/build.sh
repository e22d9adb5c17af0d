#!/usr/bin/env bash
# Builds what runs on a bare NVIDIA GPU machine (no GL loader, no apt, no network; an Ubuntu
# image with a newer glibc, Python, grpcio, OpenCV and PyTorch) and stages it, small, in .gpu/:
#   .gpu/bin/      the gpu/ tests and the kernel benchmarks, without gRPC, libstdc++/libgcc linked
#                  statically (built in build-gpu/), stripped;
#   .gpu/lib/      the few shared libraries those still need (Abseil, spdlog, fmt);
#   .gpu/server/   glimpse-server (the Release build in build/) stripped, a wrapper that runs it
#                  with its Debian libraries from .gpu/server/lib (gRPC, Protobuf, the decoders)
#                  and nothing from glibc, libstdc++ or libgcc;
#   .gpu/python/   the installed Python client package (its generated stubs included), for the
#                  end-to-end benchmark.
# Then fetches Debian's GL loader packages into .gl/. bench/nvidia/run.sh is the other side: carry
# .gpu and .gl.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/server_and_client.sh
. bench/server_and_client.sh
# A unity build, as CI builds gpu/, its tests and the benchmarks (deploy/test.sh): the batches
# CI compiled are the ones compiled here.
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGLIMPSE_GPU_ONLY=ON \
  -DGLIMPSE_STATIC_RUNTIME=ON -DCMAKE_UNITY_BUILD=ON
cmake --build build-gpu

# What the bare machine has itself and must not be replaced: glibc's libraries, the C++ runtime.
system_libs='/(libc|libm|libpthread|libdl|librt|libresolv|libutil|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so'
copy_libs() {  # copy_libs DEST BINARY...: the shared libraries the binaries load, but the system's
  local dest=$1
  shift
  mkdir -p "$dest"
  for bin in "$@"; do
    ldd "$bin" | awk '/=> \// {print $3}' | { grep -vE "$system_libs" || true; } |
      xargs -r -I{} cp -uL {} "$dest/"
  done
}
rm -rf .gpu
mkdir -p .gpu/bin .gpu/server .gpu/python
for bin in build-gpu/tests/gpu_tests build-gpu/bench/*_bench; do
  strip -o ".gpu/bin/$(basename "$bin")" "$bin"
done
copy_libs .gpu/lib build-gpu/tests/gpu_tests build-gpu/bench/*_bench
strip -o .gpu/server/glimpse-server.bin build/server/glimpse-server
copy_libs .gpu/server/lib build/server/glimpse-server
cat >.gpu/server/glimpse-server <<'WRAP'
#!/bin/sh
# glimpse-server with the Debian libraries it was built against, for this process alone.
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec "$here/glimpse-server.bin" "$@"
WRAP
chmod +x .gpu/server/glimpse-server
site=$("$venv/bin/python" -c 'import glimpse, os; print(os.path.dirname(glimpse.__file__))')
cp -r "$site" .gpu/python/
find .gpu/python -name __pycache__ -prune -exec rm -rf {} +

if [ ! -d .gl ]; then
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  # shellcheck disable=SC2086
  apt-get $o update -q
  # shellcheck disable=SC2086
  (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
du -sh .gpu .gl
