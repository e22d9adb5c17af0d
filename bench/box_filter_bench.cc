// Times every box-filter variant (GPU time, GL timer queries, including the copy of the output
// tiles into the result texture) beside the CPU reference, at 3200x2400 and 8K, radii 1, 7, 31.
// fused_strips takes 8-bit images only.
//   box_filter_bench [--runs N] [--large-runs N] [--warmup N] [--sizes WxH,...] [--radii 1,7,31]
//                    [--channels 4]
//                    [--variants shared_tile,separable,integral,fused_strips,auto]
//                    [--json FILE] [--device auto|software|N] [--kernel-warm-up 1]
//                    [--fused-rows N]
// --kernel-warm-up 1: runs BoxFilterKernel::WarmUp() first (its wall time printed), and adds a
// row per case with the first call's time ("first:<variant>"), to compare with the warm median.
// For the first call without Mesa's disk cache, run with MESA_SHADER_CACHE_DISABLE=true.
// --fused-rows N: fused_strips runs N output rows per invocation instead of its own choice
// (BoxFilterOptions::fused_rows), to compare the work split.
// Effective GB/s counts the image read once and the output written once.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/str.h"
#include "gpu/box_filter.h"
#include "gpu/reference/box_filter.h"

namespace glimpse::bench {
namespace {

int Main(int argc, char** argv) {
  BenchArgs args;
  std::vector<int> channels = {4}, radii = {1, 7, 31};
  bool kernel_warm_up = false;
  int fused_rows = 0;
  std::vector<gpu::BoxFilterVariant> variants = {
      gpu::BoxFilterVariant::kSharedTile, gpu::BoxFilterVariant::kSeparable,
      gpu::BoxFilterVariant::kIntegral, gpu::BoxFilterVariant::kFusedStrips,
      gpu::BoxFilterVariant::kAuto};
  ParseBenchArgs(argc, argv, &args, [&](const std::string& flag, const std::string& value) {
    if (flag == "--radii") {
      radii = ParseInts(value);
    } else if (flag == "--channels") {
      channels = ParseInts(value);
    } else if (flag == "--kernel-warm-up") {
      kernel_warm_up = value == "1";
    } else if (flag == "--fused-rows") {
      fused_rows = std::stoi(value);
    } else if (flag == "--variants") {
      variants = ParseVariants<gpu::BoxFilterVariant>(value, gpu::ParseBoxFilterVariant);
    } else {
      return false;
    }
    return true;
  });
  std::unique_ptr<gpu::Context> ctx = OpenContextOrExit(args);
  gpu::Context& c = *ctx;
  const double copy = CopyBandwidthGBs(c);
  std::vector<Row> rows;
  std::mt19937_64 rng(42);
  gpu::BoxFilterKernel kernel(c);
  if (kernel_warm_up) {
    absl::Status s;
    const double ms = WallMs([&] { s = kernel.WarmUp(); });
    if (!s.ok()) {
      std::fprintf(stderr, "WarmUp: %s\n", std::string(s.message()).c_str());
      return 1;
    }
    std::fprintf(stderr, "WarmUp: %.0f ms, %zu programs\n", ms, c.programs_built());
  }
  for (int ch : channels) {
    for (auto [w, h] : args.sizes) {
      const int n = args.RunsFor(w, h);
      gpu::HostImage host = gpu::HostImage::Zeros({w, h, ch, gpu::SampleType::kUint8});
      for (auto& b : host.data) b = uint8_t(rng());
      const gpu::Image image = UploadOrExit(c, host);
      const double bytes = 2.0 * double(host.desc.bytes());
      const std::string size = StrCat(w, "x", h);
      for (int r : radii) {
        const std::string params = StrCat(ch, "ch uint8 r=", r);
        const gpu::BoxFilterOptions base{.rx = r, .ry = r, .fused_rows = fused_rows};
        auto expected = reference::BoxFilter(host, base);
        Timing cpu =
            Measure([&] { return WallMs([&] { (void)reference::BoxFilter(host, base); }); }, 0, 1);
        rows.push_back({"box_filter", "cpu_reference", size, params, cpu.median_ms,
                        bytes / (cpu.median_ms * 1e6), 0, cpu.runs});
        for (gpu::BoxFilterVariant v : variants) {
          gpu::BoxFilterOptions o = base;
          o.variant = v;
          auto check = kernel.Run(image, o);
          if (!check.ok() || check->image.Download().data != expected->data) {
            std::fprintf(stderr, "variant %s disagrees with the CPU reference\n",
                         std::string(gpu::BoxFilterVariantName(v)).c_str());
            return 1;
          }
          Timing t = Measure(
              [&] {
                auto res = kernel.Run(image, o);
                return res.ok() ? double(res->gpu_ns) / 1e6 : 0.0;
              },
              args.warmup, n);
          std::string name(gpu::BoxFilterVariantName(v));
          if (v == gpu::BoxFilterVariant::kAuto) {
            name = StrCat("auto=", gpu::BoxFilterVariantName(check->variant));
          }
          if (kernel_warm_up) {
            const double first = double(check->gpu_ns) / 1e6;
            rows.push_back({"box_filter", StrCat("first:", name), size, params, first,
                            bytes / (first * 1e6), 0, 1});
            std::fprintf(stderr, "%s %s first:%s: %.2f ms\n", size.c_str(), params.c_str(),
                         name.c_str(), first);
          }
          const double gbs = bytes / (t.median_ms * 1e6);
          rows.push_back({"box_filter", name, size, params, t.median_ms, gbs, gbs / copy, t.runs});
          std::fprintf(stderr, "%s %s %s: %.2f ms\n", size.c_str(), params.c_str(), name.c_str(),
                       t.median_ms);
        }
      }
    }
  }
  Report(c, copy, rows, args.json, argc, argv);
  return 0;
}

}  // namespace
}  // namespace glimpse::bench

int main(int argc, char** argv) { return glimpse::bench::Main(argc, argv); }
