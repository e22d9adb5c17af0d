// Times every integral-image variant (GPU time of the dispatches, GL timer queries; the band
// read-back is not included) beside the CPU reference, at 3200x2400 and 8K.
//   integral_image_bench [--runs N] [--large-runs N] [--warmup N] [--sizes WxH,...]
//                        [--channels 1,4] [--types uint8,uint16,float32] [--squared 0,1]
//                        [--variants naive,...,auto] [--narrow-sums 1|0|0,1]
//                        [--json FILE] [--device auto|software|N]
// Effective GB/s counts the image read once and the 8-byte table(s) written once. On CPU renderers
// the time is wall-clock to the end of glFinish (see GpuTimer). --narrow-sums 0,1 runs each variant
// with and without 4-byte sums on the device (IntegralImageOptions::narrow_sums; rows "/8B" keep
// 8-byte sums); "+read" rows time the whole Run: the dispatches and every band's read-back (and
// widening) into a host copy of the tables allocated before the timed runs.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/str.h"
#include "gpu/integral_image.h"
#include "gpu/reference/integral_image.h"

namespace glimpse::bench {
namespace {

int Main(int argc, char** argv) {
  BenchArgs args;
  std::vector<int> channels = {1, 4};
  std::vector<int> squared_list = {0};
  std::vector<int> narrow_list = {1};
  std::vector<gpu::SampleType> types = {gpu::SampleType::kUint8};
  std::vector<gpu::IntegralImageVariant> variants = {gpu::IntegralImageVariant::kNaive,
                                                     gpu::IntegralImageVariant::kWorkEfficient,
                                                     gpu::IntegralImageVariant::kScanTransposeScan,
                                                     gpu::IntegralImageVariant::kStripScan,
                                                     gpu::IntegralImageVariant::kPackedStrips,
                                                     gpu::IntegralImageVariant::kSubgroupScan,
                                                     gpu::IntegralImageVariant::kAuto};
  ParseBenchArgs(argc, argv, &args, [&](const std::string& flag, const std::string& value) {
    if (flag == "--channels") {
      channels = ParseInts(value);
    } else if (flag == "--types") {
      types.clear();
      for (const std::string& name : SplitCommas(value)) {
        if (name == "uint8") {
          types.push_back(gpu::SampleType::kUint8);
        } else if (name == "uint16") {
          types.push_back(gpu::SampleType::kUint16);
        } else if (name == "float32") {
          types.push_back(gpu::SampleType::kFloat32);
        } else {
          std::fprintf(stderr, "--types: unknown sample type %s\n", name.c_str());
          std::exit(2);
        }
      }
    } else if (flag == "--squared") {
      squared_list = ParseInts(value);
    } else if (flag == "--narrow-sums") {
      narrow_list = ParseInts(value);
    } else if (flag == "--variants") {
      variants = ParseVariants<gpu::IntegralImageVariant>(value, gpu::ParseIntegralImageVariant);
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
  gpu::IntegralImageKernel kernel(c);
  for (gpu::SampleType type : types) {
    for (int ch : channels) {
      for (auto [w, h] : args.sizes) {
        for (int squared : squared_list) {
          const int n = args.RunsFor(w, h);
          gpu::HostImage host = gpu::HostImage::Zeros({w, h, ch, type});
          if (type == gpu::SampleType::kFloat32) {  // finite values in [0, 1)
            std::uniform_real_distribution<float> u(0.0f, 1.0f);
            for (size_t i = 0; i < host.data.size(); i += 4) {
              const float v = u(rng);
              std::memcpy(&host.data[i], &v, 4);
            }
          } else {
            for (auto& b : host.data) b = uint8_t(rng());
          }
          const gpu::Image image = UploadOrExit(c, host);
          const double tables = squared ? 2 : 1;
          const double bytes =
              double(host.desc.bytes()) + double(host.desc.pixels()) * ch * 8 * tables;
          const std::string size = StrCat(w, "x", h);
          const std::string params =
              StrCat(ch, "ch ", gpu::SampleTypeName(type), squared ? " squared" : "");
          const gpu::IntegralImageOptions ro{.squared = squared != 0};
          auto expected = reference::IntegralImage(host, ro);
          Timing cpu =
              Measure([&] { return WallMs([&] { (void)reference::IntegralImage(host, ro); }); }, 0,
                      std::max(1, n / 2));
          rows.push_back({"integral", "cpu_reference", size, params, cpu.median_ms,
                          bytes / (cpu.median_ms * 1e6), 0, cpu.runs});
          for (gpu::IntegralImageVariant v : variants) {
            if (const absl::Status s = gpu::IntegralImageVariantAvailable(c.info(), v, type);
                !s.ok()) {
              std::fprintf(stderr, "left out: %s\n", std::string(s.message()).c_str());
              continue;
            }
            for (int narrow : narrow_list) {
              const gpu::IntegralImageOptions o{
                  .squared = squared != 0, .variant = v, .narrow_sums = narrow != 0};
              auto check = gpu::ComputeIntegralImage(kernel, image, o);
              if (!check.ok() || check->sum_u != expected->sum_u || check->sq_u != expected->sq_u) {
                std::fprintf(stderr, "variant %s disagrees with the CPU reference\n",
                             std::string(gpu::IntegralImageVariantName(v)).c_str());
                return 1;
              }
              // The consumer's copy of the tables, allocated (and faulted in) once.
              const size_t table_bytes = size_t(w) * size_t(h) * size_t(ch) * 8;
              std::vector<uint8_t> out(table_bytes * (squared ? 2 : 1), 1);
              auto sink = [&](const gpu::IntegralBand& b) {
                const size_t at = (b.squared ? table_bytes : 0) + size_t(b.y0) * b.row_bytes();
                std::memcpy(out.data() + at, b.bytes().data(), b.bytes().size());
                return absl::OkStatus();
              };
              std::vector<double> walls;  // the whole Run of every timed run, warm-ups left out
              int calls = 0;
              Timing t = Measure(
                  [&] {
                    double gpu_ms = 0;
                    const double wall = WallMs([&] {
                      auto r = kernel.Run(image, o, sink);
                      gpu_ms = r.ok() ? double(r->gpu_ns) / 1e6 : 0.0;
                    });
                    if (calls++ >= args.warmup) walls.push_back(wall);
                    return gpu_ms;
                  },
                  args.warmup, n);
              const double wall_ms = Summarize(walls).median_ms;
              std::string name(gpu::IntegralImageVariantName(v));
              if (v == gpu::IntegralImageVariant::kAuto) {
                name = StrCat("auto=", gpu::IntegralImageVariantName(check->info.variant));
              }
              if (narrow_list.size() > 1 && narrow == 0) name += "/8B";
              const double gbs = bytes / (t.median_ms * 1e6);
              rows.push_back(
                  {"integral", name, size, params, t.median_ms, gbs, gbs / copy, t.runs});
              const double wall_gbs = bytes / (wall_ms * 1e6);
              rows.push_back({"integral", name + "+read", size, params, wall_ms, wall_gbs,
                              wall_gbs / copy, t.runs});
              std::fprintf(stderr, "%s %s %s: %.2f ms (min %.2f), with read-back %.2f ms%s\n",
                           size.c_str(), params.c_str(), name.c_str(), t.median_ms, t.min_ms,
                           wall_ms, check->info.narrow_sums ? " (4-byte sums)" : "");
            }
          }
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
