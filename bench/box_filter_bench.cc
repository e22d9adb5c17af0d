// Times every box-filter variant (GPU time, GL timer queries, including the copy of the output
// tiles into the result texture) beside the CPU reference, at 3200x2400 and 8K, radii 1, 7, 31.
//   box_filter_bench [--runs N] [--large-runs N] [--warmup N] [--sizes WxH,...] [--radii 1,7,31]
//                    [--channels 4] [--variants shared_tile,separable,integral,auto]
//                    [--json FILE] [--device auto|software|N]
// Effective GB/s counts the image read once and the output written once.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "gpu/box_filter.h"
#include "gpu/reference/box_filter.h"
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
  std::vector<int> channels = {4}, radii = {1, 7, 31};
  std::vector<gpu::BoxFilterVariant> variants = {
      gpu::BoxFilterVariant::kSharedTile, gpu::BoxFilterVariant::kSeparable,
      gpu::BoxFilterVariant::kIntegral, gpu::BoxFilterVariant::kAuto};
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
    } else if (a == "--radii") {
      radii = ParseInts(next());
    } else if (a == "--variants") {
      variants.clear();
      std::string s = next();
      for (size_t p = 0; p < s.size();) {
        size_t comma = s.find(',', p);
        auto v = gpu::ParseBoxFilterVariant(s.substr(p, comma - p));
        if (!v) {
          std::fprintf(stderr, "unknown variant in %s\n", s.c_str());
          return 2;
        }
        variants.push_back(*v);
        p = comma == std::string::npos ? s.size() : comma + 1;
      }
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
  gpu::BoxFilterKernel kernel(c);
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
      const double bytes = 2.0 * double(host.desc.bytes());
      const std::string size = StrCat(w, "x", h);
      for (int r : radii) {
        const std::string params = StrCat(ch, "ch uint8 r=", r);
        const gpu::BoxFilterOptions base{.rx = r, .ry = r};
        auto expected = reference::BoxFilter(host, base);
        Timing cpu =
            Measure([&] { return WallMs([&] { (void)reference::BoxFilter(host, base); }); }, 0, 1);
        rows.push_back({"box_filter", "cpu_reference", size, params, cpu.median_ms,
                        bytes / (cpu.median_ms * 1e6), 0, cpu.runs});
        for (gpu::BoxFilterVariant v : variants) {
          gpu::BoxFilterOptions o = base;
          o.variant = v;
          auto check = kernel.Run(*image, o);
          if (!check.ok() || check->image.Download().data != expected->data) {
            std::fprintf(stderr, "variant %s disagrees with the CPU reference\n",
                         std::string(gpu::BoxFilterVariantName(v)).c_str());
            return 1;
          }
          Timing t = Measure(
              [&] {
                auto res = kernel.Run(*image, o);
                return res.ok() ? double(res->gpu_ns) / 1e6 : 0.0;
              },
              warmup, n);
          std::string name(gpu::BoxFilterVariantName(v));
          if (v == gpu::BoxFilterVariant::kAuto) {
            name = StrCat("auto=", gpu::BoxFilterVariantName(check->variant));
          }
          const double gbs = bytes / (t.median_ms * 1e6);
          rows.push_back({"box_filter", name, size, params, t.median_ms, gbs, gbs / copy, t.runs});
          std::fprintf(stderr, "%s %s %s: %.2f ms\n", size.c_str(), params.c_str(), name.c_str(),
                       t.median_ms);
        }
      }
    }
  }
  Report(c, copy, rows, json, argc, argv);
  return 0;
}

}  // namespace
}  // namespace glimpse::bench

int main(int argc, char** argv) { return glimpse::bench::Main(argc, argv); }
