#!/usr/bin/env bash
# Runs on the bare NVIDIA machine, from the repository root, with build-gpu/ and .gl/ beside it
# (made by bench/nvidia/build.sh): installs the GL loader, reports the device, runs the gpu/ tests,
# every kernel benchmark and the start-up's benchmark. Tables and JSON go to ${OUT:-out/nvidia}.
#   bash bench/nvidia/run.sh [tests] [kernels] [start-up]     (no argument: all three)
# "kernels" also writes the auto check and the PyTorch peer table, which read its JSON. Each part
# is a few minutes; where one command may run only so long, run them in separate calls.
set -uo pipefail
out=${OUT:-out/nvidia}
parts=${*:-tests kernels start-up}
for p in $parts; do
  case $p in tests | kernels | start-up) ;; *) echo "run.sh: unknown part '$p'" >&2 && exit 2 ;; esac
done
want() { [[ " $parts " == *" $1 "* ]]; }
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
if want tests; then
  GLIMPSE_REQUIRE_GPU_CONTEXT=1 ./build-gpu/tests/gpu_tests 2>&1 | tail -40 | tee "$out/gpu_tests.txt"
fi
if want kernels; then
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
    [ "$name" = warm_up_bench ] && continue  # below, with the driver's disk cache set for it
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
fi
if want start-up; then
  # The start-up on this GPU: building every program and the warm-up's dispatches, then each
  # analysis's first call against its warm calls. NVIDIA's driver compiles at link time and keeps
  # its cache on disk: off (a new pod), then on an empty cache directory, then on that directory
  # again (a restarted one).
  # Building the programs one at a time against one batch (the driver compiling side by side).
  cache=$(mktemp -d)
  __GL_SHADER_DISK_CACHE=0 build-gpu/bench/warm_up_bench --batch 0 --warm-up 0 \
    --json "$out/warm_up_no_batch.json" 2>&1 | tee "$out/warm_up_no_batch.txt"
  __GL_SHADER_DISK_CACHE=0 build-gpu/bench/warm_up_bench --json "$out/warm_up_no_cache.json" 2>&1 |
    tee "$out/warm_up_no_cache.txt"
  for run in empty_cache same_cache; do
    __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH=$cache __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 \
      build-gpu/bench/warm_up_bench --json "$out/warm_up_$run.json" 2>&1 | tee "$out/warm_up_$run.txt"
  done
fi
