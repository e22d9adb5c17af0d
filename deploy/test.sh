#!/usr/bin/env bash
# Installs the dependencies, builds (Release, warnings as errors in our code), and runs every test
# with CTest on whatever EGL device is present (llvmpipe on a machine without a GPU).
#   deploy/test.sh               the normal build in build/
#   GLIMPSE_SANITIZE=1 deploy/test.sh   AddressSanitizer + UBSan build in build-asan/ with
#                                       clang-15: the C++ tests (labels gpu and service), which is
#                                       what it can check, and the fuzz targets (label fuzz: their
#                                       corpus replayed, then a short run each)
set -euo pipefail
cd "$(dirname "$0")/.."
./deploy/install-deps.sh

build=build
flags=(-DCMAKE_BUILD_TYPE=Release -DGLIMPSE_WERROR=ON)
labels=()
if [ "${GLIMPSE_SANITIZE:-0}" = 1 ]; then
  build=build-asan
  # libFuzzer comes with clang: one sanitizer build serves the tests and the fuzz targets.
  flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLIMPSE_SANITIZE=ON -DGLIMPSE_WERROR=ON
         -DCMAKE_C_COMPILER=clang-15 -DCMAKE_CXX_COMPILER=clang++-15 -DGLIMPSE_FUZZ=ON)
  # A build-asan/ configured with another compiler cannot be switched in place.
  if [ -f "$build/CMakeCache.txt" ] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang++-15' "$build/CMakeCache.txt"; then
    rm -rf "$build"
  fi
  # Mesa's own allocations at exit are not ours to chase.
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # Scripts (deploy checks, the Python client) exercise no C++ code of ours beyond what the C++
  # tests already reach, and some check the shipped Release binaries.
  labels=(-L 'gpu|service|fuzz')
fi
cmake -S . -B "$build" -G Ninja "${flags[@]}"
cmake --build "$build"
# llvmpipe uses every core for each dispatch: run test binaries one at a time.
export LP_NUM_THREADS=${LP_NUM_THREADS:-$(nproc)}
ctest --test-dir "$build" --output-on-failure --timeout 600 "${labels[@]}"
