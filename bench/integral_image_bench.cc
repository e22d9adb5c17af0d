// Times every integral-image variant (GPU time of the dispatches, GL timer queries; the band
// read-back is not included) beside the CPU reference, at 3200x2400 and 8K.
//   integral_image_bench [--runs N] [--large-runs N] [--warmup N] [--sizes WxH,...]
//                        [--channels 1,4] [--json FILE] [--device auto|software|N]
// Effective GB/s counts the image read once and the 8-byte table written once.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "gpu/integral_image.h"
#include "gpu/reference/integral_image.h"
#include "gpu/str.h"

namespace glimpse::bench {
namespace {

std::vector<int> ParseInts(const std::string& s) {
  std::vector<int> out;
  for (size_t p = 0; p < s.size();) {
    size_t comma = s.find(',', p);
    out.push_back(std::atoi(s.substr(p, comma - p).c_str()));
    p = comma == std::string::npos ? s.size() : comma + 1;
  }
  return out;
}

int Main(int argc, char** argv) {
  int runs = 7, large_runs = 3, warmup = 1;
  std::string json, device = "auto";
  std::vector<std::pair<int, int>> sizes = {{3200, 2400}, {7680, 4320}};
  std::vector<int> channels = {1, 4};
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
    } else if (a == "--large-runs") {
      large_runs = std::atoi(next().c_str());
    } else if (a == "--warmup") {
      warmup = std::atoi(next().c_str());
    } else if (a == "--json") {
      json = next();
    } else if (a == "--device") {
      device = next();
    } else if (a == "--channels") {
      channels = ParseInts(next());
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
  std::vector<Row> rows;
  std::mt19937_64 rng(42);
  gpu::IntegralImageKernel kernel(c);
  for (int ch : channels) {
    for (auto [w, h] : sizes) {
      const bool large = int64_t{w} * h > 10'000'000;
      const int n = large ? large_runs : runs;
      gpu::HostImage host = gpu::HostImage::Zeros({w, h, ch, gpu::SampleType::kUint8});
      for (auto& b : host.data) b = uint8_t(rng());
      auto image = gpu::Image::Upload(c, host);
      if (!image.ok()) {
        std::fprintf(stderr, "%s\n", std::string(image.status().message()).c_str());
        return 1;
      }
      const double bytes = double(host.desc.bytes()) + double(host.desc.bytes()) * 8;
      const std::string size = StrCat(w, "x", h);
      const std::string params = StrCat(ch, "ch uint8");
      auto expected = reference::IntegralImage(host, {});
      Timing cpu =
          Measure([&] { return WallMs([&] { (void)reference::IntegralImage(host, {}); }); }, 0,
                  std::max(1, n / 2));
      rows.push_back({"integral", "cpu_reference", size, params, cpu.median_ms,
                      bytes / (cpu.median_ms * 1e6), 0, cpu.runs});
      for (gpu::IntegralVariant v :
           {gpu::IntegralVariant::kNaive, gpu::IntegralVariant::kWorkEfficient,
            gpu::IntegralVariant::kScanTransposeScan, gpu::IntegralVariant::kStripScan,
            gpu::IntegralVariant::kAuto}) {
        const gpu::IntegralOptions o{.variant = v};
        auto check = gpu::ComputeIntegralImage(kernel, *image, o);
        if (!check.ok() || check->sum_u != expected->sum_u) {
          std::fprintf(stderr, "variant %s disagrees with the CPU reference\n",
                       std::string(gpu::IntegralVariantName(v)).c_str());
          return 1;
        }
        auto sink = [](const gpu::IntegralBand&) { return absl::OkStatus(); };
        Timing t = Measure(
            [&] {
              auto r = kernel.Run(*image, o, sink);
              return r.ok() ? double(r->gpu_ns) / 1e6 : 0.0;
            },
            warmup, n);
        std::string name(gpu::IntegralVariantName(v));
        if (v == gpu::IntegralVariant::kAuto) {
          name = StrCat("auto=", gpu::IntegralVariantName(check->info.variant));
        }
        const double gbs = bytes / (t.median_ms * 1e6);
        rows.push_back({"integral", name, size, params, t.median_ms, gbs, gbs / copy, t.runs});
        std::fprintf(stderr, "%s %s %s: %.2f ms\n", size.c_str(), params.c_str(), name.c_str(),
                     t.median_ms);
      }
    }
  }
  Report(c, copy, rows, json, argc, argv);
  return 0;
}

}  // namespace
}  // namespace glimpse::bench

int main(int argc, char** argv) { return glimpse::bench::Main(argc, argv); }
