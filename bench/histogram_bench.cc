// Times every histogram variant with GL timer queries and prints the seed's table (CPU 1 thread,
// GPU global atomics, GPU shared, GPU shared + per-thread, plus private rows) at 3200x2400 and 8K.
//   histogram_bench [--runs N] [--warmup N] [--sizes 3200x2400,7680x4320] [--json FILE]
//                   [--device auto|software|N]
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
  int runs = 15, warmup = 3;
  std::string json, device = "auto";
  std::vector<std::pair<int, int>> sizes = {{3200, 2400}, {7680, 4320}};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--runs") {
      runs = std::atoi(next().c_str());
    } else if (a == "--warmup") {
      warmup = std::atoi(next().c_str());
    } else if (a == "--json") {
      json = next();
    } else if (a == "--device") {
      device = next();
    } else if (a == "--sizes") {
      sizes.clear();
      std::string s = next();
      for (size_t p = 0; p < s.size();) {
        size_t comma = s.find(',', p);
        std::string one = s.substr(p, comma - p);
        int w = 0, h = 0;
        if (std::sscanf(one.c_str(), "%dx%d", &w, &h) != 2) {
          std::fprintf(stderr, "--sizes wants WxH[,WxH...], got %s\n", one.c_str());
          return 2;
        }
        sizes.emplace_back(w, h);
        p = comma == std::string::npos ? s.size() : comma + 1;
      }
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  auto ctx = gpu::Context::Create({.device = device, .debug_output = false});
  if (!ctx.ok()) {
    std::fprintf(stderr, "no GL context: %s\n", std::string(ctx.status().message()).c_str());
    return 1;
  }
  gpu::Context& c = **ctx;
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
  for (auto [w, h] : sizes) {
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
    auto image = gpu::Image::Upload(c, host);
    if (!image.ok()) {
      std::fprintf(stderr, "%s\n", std::string(image.status().message()).c_str());
      return 1;
    }
    const double bytes = double(host.desc.bytes());
    const std::string size = StrCat(w, "x", h);
    for (const Config& cfg : configs) {
      const int cpu_runs = std::max(1, runs / 5);
      Timing cpu = Measure(
          [&] { return WallMs([&] { (void)reference::Histogram(host, cfg.options); }); }, 1,
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
              auto r = kernel.Run(*image, o);
              if (!r.ok() || r->counts != expected->counts) correct = false;
              if (r.ok()) ran = r->variant;
              return r.ok() ? double(r->gpu_ns) / 1e6 : 0.0;
            },
            warmup, runs);
        if (!correct) {
          std::fprintf(stderr, "variant %s disagrees with the CPU reference\n",
                       std::string(gpu::HistogramVariantName(v)).c_str());
          return 1;
        }
        std::string name(gpu::HistogramVariantName(v));
        if (v == gpu::HistogramVariant::kAuto) name = StrCat("auto=", gpu::HistogramVariantName(ran));
        const double gbs = bytes / (t.median_ms * 1e6);
        rows.push_back({"histogram", name, size, cfg.label, t.median_ms, gbs, gbs / copy, t.runs});
      }
    }
  }
  Report(c, copy, rows, json, argc, argv);
  return 0;
}

}  // namespace
}  // namespace glimpse::bench

int main(int argc, char** argv) { return glimpse::bench::Main(argc, argv); }
