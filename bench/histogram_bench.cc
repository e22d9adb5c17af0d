// Times every histogram variant with GL timer queries and prints the seed's table (CPU 1 thread,
// GPU global atomics, GPU shared, GPU shared + per-thread, plus private rows) at 3200x2400 and 8K.
//   histogram_bench [--runs N] [--large-runs N] [--warmup N] [--sizes 3200x2400,7680x4320]
//                   [--json FILE] [--device auto|software|N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "gpu/histogram.h"
#include "gpu/reference/histogram.h"
#include "gpu/str.h"

namespace glimpse::bench {
namespace {

struct Config {
  const char* label;
  gpu::HistogramOptions options;
};

int Main(int argc, char** argv) {
  BenchArgs args;
  args.runs = 15;
  args.large_runs = 15;
  args.warmup = 3;
  ParseBenchArgs(argc, argv, &args);
  std::unique_ptr<gpu::Context> ctx = OpenContextOrExit(args);
  gpu::Context& c = *ctx;
  const double copy = CopyBandwidthGBs(c);

  // The seed's histogram: 16 bins of the RGB mean. And the usual one: 256 bins per channel.
  std::vector<Config> configs(2);
  configs[0].label = "rgb_mean 16 bins";
  configs[0].options.bins = 16;
  configs[0].options.source = gpu::HistogramSource::kRgbMean;
  configs[1].label = "all 256 bins";
  configs[1].options.bins = 256;
  configs[1].options.source = gpu::HistogramSource::kAllChannels;

  std::vector<Row> rows;
  std::mt19937_64 rng(42);
  gpu::HistogramKernel kernel(c);
  for (auto [w, h] : args.sizes) {
    gpu::HostImage host = gpu::HostImage::Zeros({w, h, 4, gpu::SampleType::kUint8});
    // A photo-like image: smooth gradients plus noise, so runs of equal bins occur as in real data.
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        for (int ch = 0; ch < 4; ++ch) {
          int v = (x * 255 / w + y * 255 / h + ch * 40) / 2 + int(rng() % 9) - 4;
          host.set<uint8_t>(x, y, ch, uint8_t(std::clamp(v, 0, 255)));
        }
      }
    }
    const gpu::Image image = UploadOrExit(c, host);
    const double bytes = double(host.desc.bytes());
    const std::string size = StrCat(w, "x", h);
    for (const Config& cfg : configs) {
      const int runs = args.RunsFor(w, h);
      const int cpu_runs = std::max(1, runs / 5);
      Timing cpu =
          Measure([&] { return WallMs([&] { (void)reference::Histogram(host, cfg.options); }); }, 1,
                  cpu_runs);
      rows.push_back({"histogram", "cpu_1_thread", size, cfg.label, cpu.median_ms,
                      bytes / (cpu.median_ms * 1e6), 0, cpu.runs});
      auto expected = reference::Histogram(host, cfg.options);
      for (gpu::HistogramVariant v :
           {gpu::HistogramVariant::kGlobalAtomics, gpu::HistogramVariant::kSharedAtomics,
            gpu::HistogramVariant::kSharedPerThread, gpu::HistogramVariant::kPrivateRows,
            gpu::HistogramVariant::kAuto}) {
        gpu::HistogramOptions o = cfg.options;
        o.variant = v;
        bool correct = true;
        gpu::HistogramVariant ran = v;
        Timing t = Measure(
            [&] {
              auto r = kernel.Run(image, o);
              if (!r.ok() || r->counts != expected->counts) correct = false;
              if (r.ok()) ran = r->variant;
              return r.ok() ? double(r->gpu_ns) / 1e6 : 0.0;
            },
            args.warmup, runs);
        if (!correct) {
          std::fprintf(stderr, "variant %s disagrees with the CPU reference\n",
                       std::string(gpu::HistogramVariantName(v)).c_str());
          return 1;
        }
        std::string name(gpu::HistogramVariantName(v));
        if (v == gpu::HistogramVariant::kAuto)
          name = StrCat("auto=", gpu::HistogramVariantName(ran));
        const double gbs = bytes / (t.median_ms * 1e6);
        rows.push_back({"histogram", name, size, cfg.label, t.median_ms, gbs, gbs / copy, t.runs});
      }
    }
  }
  Report(c, copy, rows, args.json, argc, argv);
  return 0;
}

}  // namespace
}  // namespace glimpse::bench

int main(int argc, char** argv) { return glimpse::bench::Main(argc, argv); }
