#!/usr/bin/env bash
# Runs on the bare NVIDIA machine, from the repository root, with .gpu/ and .gl/ beside it (made
# by bench/nvidia/build.sh): installs the GL loader, reports the device, then runs the parts named
# (default: all, in this order) within one time budget, each part within its own limit:
#   tests     the gpu/ tests on the NVIDIA driver
#   e2e       bench/e2e.py: glimpse-server against the grpcio + OpenCV peer on this machine's
#             cores, photos sent inline, with the servers' CPU ms per call (the large photos'
#             rows again with staging memory off, the 3840x2160 row with 128 MiB of it); then
#             bench/batch.py: 1000 thumbnails' histograms in AnalyzeBatch calls, packed and
#             unpacked
#   kernels   every kernel benchmark, the auto check and the PyTorch peer table
#   start-up  the start-up's benchmark with the driver's shader cache off, empty and filled
#   [KERNELS="box_filter ..."] bash bench/nvidia/run.sh [--budget-s N] [part...]
# KERNELS names the kernel benchmarks to run (then without the upload's and PyTorch's tables).
# Tables, logs and JSON go to a work folder; its summary and tables are copied to ${OUT:-out/nvidia}
# with everything in nvidia.tgz there, also when the budget runs out. All four parts take up to
# about 14 minutes (the parts' limits): where one command may run only 10, run "tests e2e" and
# "kernels start-up" as two commands.
set -uo pipefail
budget=560
if [ "${1:-}" = --budget-s ]; then budget=$2 && shift 2; fi
parts=${*:-tests e2e kernels start-up}
for p in $parts; do
  case $p in tests | e2e | kernels | start-up) ;; *) echo "run.sh: unknown part '$p'" >&2 && exit 2 ;; esac
done
want() { [[ " $parts " == *" $1 "* ]]; }
dest=${OUT:-out/nvidia}
work=$(mktemp -d)/nvidia
mkdir -p "$dest" "$work"
start=$SECONDS

# step LIMIT_S NAME COMMAND...: COMMAND with its output in $work/NAME.txt, stopped after LIMIT_S
# or when the budget is spent; its status and time go to summary.txt.
step() {
  local limit=$1 name=$2 left
  shift 2
  left=$((budget - (SECONDS - start)))
  ((left < limit)) && limit=$left
  if ((limit < 5)); then
    echo "== $name: not run, the budget of $budget s is spent" | tee -a "$work/summary.txt"
    return
  fi
  local t0=$SECONDS rc
  timeout -k 5 "$limit" "$@" >"$work/$name.txt" 2>&1
  rc=$?
  pkill -f glimpse-server.bin 2>/dev/null
  pkill -f e2e_peer.py 2>/dev/null
  echo "== $name: exit $rc after $((SECONDS - t0)) s (limit $limit s)" | tee -a "$work/summary.txt"
  tail -n 12 "$work/$name.txt"
}
finish() {
  cp "$work"/summary.txt "$work"/*.md "$dest"/ 2>/dev/null
  tar -czf "$dest/nvidia.tgz" -C "$(dirname "$work")" nvidia
}
trap finish EXIT

for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
for v in /usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json \
         /usr/share/glvnd/egl_vendor.d/10_nvidia.json; do
  [ -f "$v" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$v && break
done
export LD_LIBRARY_PATH=$PWD/.gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{
  date -u
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,pcie.link.gen.max,pcie.link.width.max --format=csv
  echo "CPUs: $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  python3 -c 'import sys, grpc, google.protobuf as p, cv2, numpy; print("Python", sys.version.split()[0], "grpcio", grpc.__version__, "protobuf", p.__version__, "OpenCV", cv2.__version__, "numpy", numpy.__version__)'
} 2>&1 | tee "$work/device.txt"

if want tests; then
  # First the device's arithmetic as the kernels rely on it, with each program's binary (the
  # driver's assembly) kept in programs/ for reading what its compiler made of them.
  mkdir -p "$work/programs"
  step 30 arithmetic env GLIMPSE_DUMP_PROGRAMS="$work/programs" GLIMPSE_REQUIRE_GPU_CONTEXT=1 \
    .gpu/bin/gpu_tests --gtest_filter='ArithmeticTest.*'
  # Twelve shards side by side (their CPU references take most of the time, the cores are many:
  # eight did not all finish in 150 s on an H100 machine's 16).
  step 150 gpu_tests bash -c 'for i in $(seq 0 11); do
      GTEST_TOTAL_SHARDS=12 GTEST_SHARD_INDEX=$i GLIMPSE_REQUIRE_GPU_CONTEXT=1 .gpu/bin/gpu_tests \
        >"$0/gpu_tests_$i.txt" 2>&1 & done; rc=0; for j in $(seq 12); do wait -n || rc=1; done
    grep -h "^\[  \(PASSED\|FAILED\)" "$0"/gpu_tests_*.txt; exit $rc' "$work"
fi
if want e2e; then
  # Every row; both services get all of this machine's cores (cv2.setNumThreads, the server's
  # decode threads); the throughput columns at 4 and 16 callers, spread over 4 client processes
  # (one Python process's grpcio capped both services near 1300 thumbnails/s on an H100 machine).
  step 170 e2e env PYTHONPATH="$PWD/.gpu/python" PYTHONUNBUFFERED=1 python3 bench/e2e.py \
    --server-binary .gpu/server/glimpse-server --seconds 1.2 --callers 4,16 --client-processes 4 \
    --markdown "$work/e2e_nvidia.md" --json "$work/e2e_nvidia.json"
  # The large-photo rows again with staging memory off (--staging-bytes=0): decoders write into
  # fresh host memory and the GL thread copies from it, as before staging memory existed.
  step 60 e2e_no_staging env PYTHONPATH="$PWD/.gpu/python" PYTHONUNBUFFERED=1 python3 bench/e2e.py \
    --server-binary .gpu/server/glimpse-server --seconds 1.2 --callers 4,16 --client-processes 4 \
    --rows 'histogram (1080p JPEG q90$|2160p|960x540)' --server-arg=--staging-bytes=0 \
    --markdown "$work/e2e_nvidia_no_staging.md" --json "$work/e2e_nvidia_no_staging.json"
  # 3840x2160 photos with 128 MiB of staging memory, the fixed default before it grew with the
  # decoding threads: room for 4 such images at a time among 16 decoders (run 2: 0.75x the
  # peer's rate with 16 callers, on under 5 of 16 cores).
  step 40 e2e_staging_128mib env PYTHONPATH="$PWD/.gpu/python" PYTHONUNBUFFERED=1 python3 bench/e2e.py \
    --server-binary .gpu/server/glimpse-server --seconds 1.2 --callers 4,16 --client-processes 4 \
    --rows 'histogram 2160p' --server-arg=--staging-bytes=134217728 \
    --markdown "$work/e2e_nvidia_staging_128mib.md" --json "$work/e2e_nvidia_staging_128mib.json"
  # Many thumbnails per call: packs of images per GPU job against a job per image, the peer's
  # single calls and the decode-only floor on these cores.
  step 60 batch env PYTHONPATH="$PWD/.gpu/python" PYTHONUNBUFFERED=1 python3 bench/batch.py \
    --server-binary .gpu/server/glimpse-server --images 1000 --repeats 2 \
    --markdown "$work/batch_nvidia.md" --json "$work/batch_nvidia.json"
fi
if want kernels; then
  # Every variant at 3200x2400 and 8K (the benchmarks' default sizes), with the cases of the peer
  # table besides their defaults: box filters r = 1, 7, 31, 32 on RGBA and one channel,
  # compaction of one channel, integral images with their squares.
  declare -A extra=(
    [box_filter_bench]="--radii 1,7,31,32 --channels 4,1"
    [compaction_bench]="--channels 4,1 --percents 1,10,50"
    [integral_image_bench]="--squared 0,1"
  )
  for b in ${KERNELS:-histogram integral_image box_filter compaction}; do
    # shellcheck disable=SC2086
    step 60 "${b}_bench" ".gpu/bin/${b}_bench" ${extra[${b}_bench]:-} --runs 5 \
      --json "$work/${b}_bench.json"
  done
  # Small images' histograms packed into one dispatch against an upload and a dispatch each.
  [ -n "${KERNELS:-}" ] || step 30 histogram_packed .gpu/bin/histogram_packed_bench --images 256 \
    --sizes 256x256,64x64 --variants auto,global_atomics --configs all,luma --runs 11 \
    --json "$work/histogram_packed.json"
  # Host to device and back over PCIe, by size and channel count (not a kernel: its own JSON name).
  [ -n "${KERNELS:-}" ] || step 30 upload .gpu/bin/upload_bench --sizes 256x256,1920x1080,3840x2160,7680x4320 \
    --json "$work/upload.json"
  # Whether auto ran the fastest variant of each case (the table for setting this device's defaults).
  step 20 auto_check python3 bench/nvidia/auto_check.py "$work" --markdown "$work/auto_check.md"
  # PyTorch on the same GPU, joined with the tables above.
  [ -n "${KERNELS:-}" ] || step 60 torch_peers python3 bench/nvidia/torch_peers.py --glimpse-json "$work" \
    --markdown "$work/torch_peers.md" --json "$work/torch_peers.json"
fi
if want start-up; then
  # NVIDIA's driver compiles at link time and keeps its cache on disk: off (a new pod), then on an
  # empty cache directory, then on that directory again (a restarted one); first the programs
  # built one at a time, not side by side.
  cache=$(mktemp -d)
  step 25 warm_up_no_batch env __GL_SHADER_DISK_CACHE=0 .gpu/bin/warm_up_bench --batch 0 \
    --warm-up 0 --json "$work/warm_up_no_batch.json"
  step 25 warm_up_no_cache env __GL_SHADER_DISK_CACHE=0 .gpu/bin/warm_up_bench \
    --json "$work/warm_up_no_cache.json"
  for run in empty_cache same_cache; do
    step 30 "warm_up_$run" env __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_PATH="$cache" \
      __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 .gpu/bin/warm_up_bench --json "$work/warm_up_$run.json"
  done
fi
echo "== all parts done in $((SECONDS - start)) s of $budget" | tee -a "$work/summary.txt"
