#!/usr/bin/env bash
# Runs on the bare NVIDIA machine, from the repository root, with build-gpu/ and .gl/ beside it
# (made by bench/nvidia/build.sh): installs the GL loader, reports the device, runs the gpu/ tests
# and every kernel benchmark. Tables and JSON go to ${OUT:-out/nvidia}.
set -uo pipefail
out=${OUT:-out/nvidia}
mkdir -p "$out"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
for v in /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json \
         /usr/share/glvnd/egl_vendor.d/10_nvidia.json; do
  [ -f "$v" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$v && break
done
export LD_LIBRARY_PATH=$PWD/build-gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{
  date -u
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
} 2>&1 | tee "$out/device.txt"
GLIMPSE_REQUIRE_GPU_CONTEXT=1 ./build-gpu/tests/gpu_tests 2>&1 | tail -40 | tee "$out/gpu_tests.txt"
for b in build-gpu/bench/*_bench; do
  name=$(basename "$b")
  "$b" --json "$out/$name.json" 2>&1 | tee "$out/$name.txt"
done
