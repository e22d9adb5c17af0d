#!/usr/bin/env bash
# Installs the dependencies, builds (Release, warnings as errors in our code), and runs every test
# with CTest on whatever EGL device is present (llvmpipe on a machine without a GPU).
#   deploy/test.sh                      the normal build in build/, every test
#   GLIMPSE_SANITIZE=1 deploy/test.sh   AddressSanitizer + UBSan build in build-asan/ with
#                                       clang-15: the C++ tests (labels gpu, service, one_thread),
#                                       which is what it can check, and the fuzz targets (label
#                                       fuzz: their corpus replayed, then a short run each)
#   GLIMPSE_SANITIZE=thread deploy/test.sh
#                                       ThreadSanitizer build in build-tsan/: the service tests
#                                       (label service), where the gRPC callbacks, the GPU worker
#                                       and the host pool share the queue, the store and the
#                                       result buffer (not label one_thread: the parser's and the
#                                       decoders' tests); tests/tsan.supp says what is not reported
# An argument runs one step: `build` (install, configure, build) or `test` (CTest on what the
# build step left), so CI can build the next configuration while this one's tests run.
# GLIMPSE_TEST_LABELS=REGEX runs only the tests of those labels (CI runs the fuzz targets apart).
# GLIMPSE_SKIP_DEPS=1 skips the install (CI installs once for every configuration).
set -euo pipefail
cd "$(dirname "$0")/.."
step=${1:-all}
case "$step" in
  all | build | test) ;;
  *) echo "usage: deploy/test.sh [build|test]" >&2; exit 2 ;;
esac

build=build
flags=(-DCMAKE_BUILD_TYPE=Release -DGLIMPSE_WERROR=ON)
labels=()
targets=()
# Unity builds (CMake compiles each target's sources in batches of 8 files to a translation
# unit): the gRPC, protobuf and GoogleTest headers that most files include are parsed, and their
# templates compiled, once a batch rather than once a file. From nothing on a 2-core VM the
# Release build took 292 s against 555 s file by file; the ASan build, at the lowest priority
# beside the Release tests, 653 s against 841 s. A batch also hides a file's missing #include
# behind an earlier file's: `deploy/check-includes.py --compile build` compiles files alone, as a
# build file by file (CMake's default) does (CI: those a change touches).
# The sanitizer builds: -O1 (what the sanitizers' own documentation suggests for reasonable speed)
# with line tables only, which is all a report's stack needs. Against RelWithDebInfo's -O2 -g
# that compiles a service file 10-15 % faster with clang's ASan and about 45 % faster with g++'s
# TSan (one file timed each way on a 2-core VM).
sanitizer_flags=("-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG"
                 "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -DNDEBUG")
case "${GLIMPSE_SANITIZE:-0}" in
  0) ;;
  1)
    build=build-asan
    # libFuzzer comes with clang: one sanitizer build serves the tests and the fuzz targets.
    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLIMPSE_SANITIZE=ON -DGLIMPSE_WERROR=ON
           -DCMAKE_C_COMPILER=clang-15 -DCMAKE_CXX_COMPILER=clang++-15 -DGLIMPSE_FUZZ=ON
           "${sanitizer_flags[@]/%/ -gline-tables-only}")
    # A build-asan/ configured with another compiler cannot be switched in place.
    if [ "$step" != test ] && [ -f "$build/CMakeCache.txt" ] &&
      ! grep -q '^CMAKE_CXX_COMPILER:.*clang++-15' "$build/CMakeCache.txt"; then
      rm -rf "$build"
    fi
    # Mesa's own allocations at exit are not ours to chase.
    export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    # Scripts (deploy checks, the Python client) exercise no C++ code of ours beyond what the C++
    # tests already reach, and some check the shipped Release binaries.
    labels=(-L 'gpu|service|one_thread|fuzz')
    targets=(gpu_tests service_tests glimpse glimpse-server glimpse_fuzz_targets)
    ;;
  thread)
    build=build-tsan
    flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLIMPSE_TSAN=ON -DGLIMPSE_WERROR=ON
           "${sanitizer_flags[@]/%/ -g1}")
    # Each GL context runs on one thread (its owner); the service tests hold the threads that
    # share state, the start-up warm-up's helper contexts included. ignore_noninstrumented_modules:
    # the memcpy and the like that uninstrumented libraries call (protobuf parsing an upload's
    # chunks through libstdc++ into memory gRPC's threads hand around) are not checked; each of
    # those reports was suppressed anyway, after TSan had searched the whole megabyte for the
    # racy byte: 20-240 s per 3 MB upload, past the CLI test's deadline. Races in our own code
    # are still reported (an unlocked read of a worker counter, tried, was).
    export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp:second_deadlock_stack=1:ignore_noninstrumented_modules=1"
    labels=(-L service)
    targets=(service_tests glimpse glimpse-server)
    ;;
  *) echo "GLIMPSE_SANITIZE must be 1 (ASan + UBSan) or thread (TSan)" >&2; exit 2 ;;
esac

if [ "$step" != test ]; then
  [ "${GLIMPSE_SKIP_DEPS:-0}" = 1 ] || ./deploy/install-deps.sh
  cmake -S . -B "$build" -G Ninja "${flags[@]}" -DCMAKE_UNITY_BUILD=ON
  cmake --build "$build" ${targets[@]:+--target "${targets[@]}"}
fi
if [ -n "${GLIMPSE_TEST_LABELS:-}" ]; then
  labels=(-L "$GLIMPSE_TEST_LABELS")
fi
if [ "$step" != build ]; then
  # llvmpipe uses every core for each dispatch: the tests that use the GPU hold the CTest
  # resource lock `gpu` and run one at a time; the rest (client, deploy, Python) run beside them.
  export LP_NUM_THREADS=${LP_NUM_THREADS:-$(nproc)}
  status=0
  ctest --test-dir "$build" --output-on-failure --timeout 600 -j "$(nproc)" \
    "${labels[@]}" || status=$?
  if [ "$status" != 0 ]; then
    # Each failure's output is in the log above, among the parallel run's lines; run the failed
    # tests once more, one at a time, so that their output also ends the log (a test that passes
    # now failed only under the run's load: the run has failed all the same).
    echo "== the failed tests again, one at a time (the run above failed, whatever they do now)"
    ctest --test-dir "$build" --rerun-failed --output-on-failure --timeout 600 "${labels[@]}" || true
    exit "$status"
  fi
fi
