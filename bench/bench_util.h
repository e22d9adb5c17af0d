// Shared by the benchmark programs: timing statistics, the copy-bandwidth probe, table and JSON
// output.
#ifndef GLIMPSE_BENCH_BENCH_UTIL_H_
#define GLIMPSE_BENCH_BENCH_UTIL_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpu/context.h"
#include "gpu/image.h"

namespace glimpse::bench {

// The flags every benchmark program takes.
struct BenchArgs {
  int runs = 7;
  int large_runs = 3;  // runs for images over 10 MP
  int warmup = 1;
  std::string json;  // --json FILE: the rows as JSON too
  std::string device = "auto";
  std::vector<std::pair<int, int>> sizes = {{3200, 2400}, {7680, 4320}};

  int RunsFor(int w, int h) const { return int64_t{w} * h > 10'000'000 ? large_runs : runs; }
};

// Parses --runs, --large-runs, --warmup, --json, --device and --sizes WxH[,WxH] into `args`; any
// other `--flag VALUE` goes to `extra`, which returns false for a flag it does not know. Prints
// the problem and exits 2 on a bad command line.
void ParseBenchArgs(
    int argc, char** argv, BenchArgs* args,
    const std::function<bool(const std::string& flag, const std::string& value)>& extra = {});

// "a,b,c" -> {"a", "b", "c"}; ParseInts for lists of numbers.
std::vector<std::string> SplitCommas(const std::string& s);
std::vector<int> ParseInts(const std::string& s);

// "--variants=a,b": each name through the analysis's parse function; exits 2 naming an unknown one.
template <typename Variant, typename Parse>
std::vector<Variant> ParseVariants(const std::string& value, Parse parse) {
  std::vector<Variant> out;
  for (const std::string& name : SplitCommas(value)) {
    std::optional<Variant> v = parse(name);
    if (!v) {
      std::fprintf(stderr, "--variants: unknown variant %s\n", name.c_str());
      std::exit(2);
    }
    out.push_back(*v);
  }
  return out;
}

// The context the benchmark runs in (debug output off); prints the reason and exits 1 without one.
// With `staging_bytes` of staging memory (gpu/staging.h), exiting where the device has none.
std::unique_ptr<gpu::Context> OpenContextOrExit(const BenchArgs& args, size_t staging_bytes = 0);

// `host` on the GPU; prints the reason and exits 1 where the device refuses it.
gpu::Image UploadOrExit(gpu::Context& ctx, const gpu::HostImage& host);

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  int runs = 0;
};

// The median and minimum of `ms` (milliseconds; zeros when empty).
Timing Summarize(std::vector<double> ms);

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
// the device description and the command line; copy_gbs 0: not measured (no line for it).
void Report(const gpu::Context& ctx, double copy_gbs, const std::vector<Row>& rows,
            const std::string& json_path, int argc, char** argv);

}  // namespace glimpse::bench

#endif  // GLIMPSE_BENCH_BENCH_UTIL_H_
