// Shared by the benchmark programs: timing statistics, the copy-bandwidth probe, table and JSON
// output.
#ifndef GLIMPSE_BENCH_BENCH_UTIL_H_
#define GLIMPSE_BENCH_BENCH_UTIL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpu/context.h"

namespace glimpse::bench {

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  int runs = 0;
};

// Runs `fn` `warmup` times, then `runs` times, and returns the median and minimum of what `fn`
// returned (milliseconds).
Timing Measure(const std::function<double()>& fn, int warmup, int runs);

// Milliseconds of wall time `fn` takes (for CPU references).
double WallMs(const std::function<void()>& fn);

// The device's copy bandwidth in GB/s (bytes read + bytes written per second) for a large
// glCopyBufferSubData, median of several runs, timed with GL_TIME_ELAPSED.
double CopyBandwidthGBs(gpu::Context& ctx, size_t bytes = size_t{256} << 20);

// One row of a benchmark table.
struct Row {
  std::string kernel, variant, size, params;
  double ms = 0;          // median
  double gbs = 0;         // effective GB/s: bytes the kernel must read + write / time; 0 if none
  double copy_ratio = 0;  // gbs / device copy bandwidth
  int runs = 0;
};

// Prints rows as an aligned text table and, when json_path is not empty, writes them as JSON with
// the device description and the command line.
void Report(const gpu::Context& ctx, double copy_gbs, const std::vector<Row>& rows,
            const std::string& json_path, int argc, char** argv);

}  // namespace glimpse::bench

#endif  // GLIMPSE_BENCH_BENCH_UTIL_H_
