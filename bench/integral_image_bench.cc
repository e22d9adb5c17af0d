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

int Main(int argc, char** argv) {
  BenchArgs args;
  std::vector<int> channels = {1, 4};
  ParseBenchArgs(argc, argv, &args, [&](const std::string& flag, const std::string& value) {
    if (flag != "--channels") return false;
    channels = ParseInts(value);
    return true;
  });
  std::unique_ptr<gpu::Context> ctx = OpenContextOrExit(args);
  gpu::Context& c = *ctx;
  const double copy = CopyBandwidthGBs(c);
  std::vector<Row> rows;
  std::mt19937_64 rng(42);
  gpu::IntegralImageKernel kernel(c);
  for (int ch : channels) {
    for (auto [w, h] : args.sizes) {
      const int n = args.RunsFor(w, h);
      gpu::HostImage host = gpu::HostImage::Zeros({w, h, ch, gpu::SampleType::kUint8});
      for (auto& b : host.data) b = uint8_t(rng());
      const gpu::Image image = UploadOrExit(c, host);
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
        auto check = gpu::ComputeIntegralImage(kernel, image, o);
        if (!check.ok() || check->sum_u != expected->sum_u) {
          std::fprintf(stderr, "variant %s disagrees with the CPU reference\n",
                       std::string(gpu::IntegralVariantName(v)).c_str());
          return 1;
        }
        auto sink = [](const gpu::IntegralBand&) { return absl::OkStatus(); };
        Timing t = Measure(
            [&] {
              auto r = kernel.Run(image, o, sink);
              return r.ok() ? double(r->gpu_ns) / 1e6 : 0.0;
            },
            args.warmup, n);
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
  Report(c, copy, rows, args.json, argc, argv);
  return 0;
}

}  // namespace
}  // namespace glimpse::bench

int main(int argc, char** argv) { return glimpse::bench::Main(argc, argv); }
