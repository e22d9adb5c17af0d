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
# Every variant at 3200x2400 and 8K (the benchmarks' default sizes), with the cases of the peer
# table besides their defaults: box filters r = 1, 7, 32 on RGBA and r = 7 on one channel,
# compaction of one channel, integral images with their squares.
declare -A extra=(
  [box_filter_bench]="--radii 1,7,31,32 --channels 4,1"
  [compaction_bench]="--channels 4,1 --percents 1,10,50"
  [integral_image_bench]="--squared 0,1"
)
for b in build-gpu/bench/*_bench; do
  name=$(basename "$b")
  # shellcheck disable=SC2086
  "$b" ${extra[$name]:-} --json "$out/$name.json" 2>&1 | tee "$out/$name.txt"
done
# Whether auto ran the fastest variant of each case (the table for setting this device's defaults).
python3 bench/nvidia/auto_check.py "$out" --markdown "$out/auto_check.md" 2>&1 | tail -60
# PyTorch on the same GPU, joined with the tables above (skipped where PyTorch is missing).
if python3 -c 'import torch, numpy' 2>/dev/null; then
  python3 bench/nvidia/torch_peers.py --glimpse-json "$out" --markdown "$out/torch_peers.md" \
    --json "$out/torch_peers.json" 2>&1 | tee "$out/torch_peers.txt"
else
  echo "no PyTorch here: the peer table is skipped" | tee "$out/torch_peers.txt"
fi
