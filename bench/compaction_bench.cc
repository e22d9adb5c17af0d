// Times every compaction variant on RGBA8 (or 1 to 3-channel uint8) images where channel 0 passes
// with a set probability (1%, 10%, 50%), at 3200x2400 and 8K, with the whole list returned
// (max_results = pixels) and in count-only mode; the single-threaded CPU reference beside them.
// --source luma (3 or 4 channels) tests luma >= t instead, t the lowest luma that passes at most
// the percentage (the luma percentile: the share is printed).
//   compaction_bench [--runs N] [--warmup N] [--sizes 3200x2400,7680x4320] [--channels 4,1]
//                    [--percents 1,10,50] [--source channel|luma]
//                    [--variants atomic_per_pixel,...,auto] [--json FILE]
//                    [--device auto|software|N]
// "api" rows time Run() end to end on the host clock: every dispatch, the read-back of the
// results and, for the atomic variants, reading back and ordering every passing index. "gpu" rows
// are the result's gpu_ns (dispatches only). Effective GB/s counts the image read once plus the
// list written (8 bytes of x, y and 4 of samples per passing pixel).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/str.h"
#include "gpu/compaction.h"
#include "gpu/reference/compaction.h"

namespace glimpse::bench {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The lowest t for which luma >= t passes at most `percent`% of the pixels (found with the CPU
// reference's counts); prints the share it passes.
int LumaThreshold(const gpu::HostImage& host, int percent) {
  const auto passing = [&](int t) {
    return reference::Compact(host, {.source = gpu::CompactionSource::kLuma,
                                     .lo = double(t),
                                     .hi = 255,
                                     .count_only = true})
        ->total;
  };
  const uint64_t most = uint64_t(host.desc.pixels()) * uint64_t(percent) / 100;
  int lo = 0, hi = 255;  // the top: luma >= 255 whatever it passes
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (passing(mid) <= most) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  std::fprintf(stderr, "luma >= %d passes %.2f%% of the pixels\n", lo,
               100.0 * double(passing(lo)) / double(host.desc.pixels()));
  return lo;
}

int Main(int argc, char** argv) {
  BenchArgs args;
  args.warmup = 2;
  std::vector<int> channel_counts = {4}, percents = {1, 10, 50};
  gpu::CompactionSource source = gpu::CompactionSource::kChannel;
  std::vector<gpu::CompactionVariant> variants = {
      gpu::CompactionVariant::kAtomicPerPixel,     gpu::CompactionVariant::kWorkgroupAggregated,
      gpu::CompactionVariant::kOrderedScan,        gpu::CompactionVariant::kStripScan,
      gpu::CompactionVariant::kSubgroupAggregated, gpu::CompactionVariant::kAuto};
  ParseBenchArgs(argc, argv, &args, [&](const std::string& flag, const std::string& value) {
    if (flag == "--channels") {
      channel_counts = ParseInts(value);
    } else if (flag == "--percents") {
      percents = ParseInts(value);
    } else if (flag == "--source") {
      const std::optional<gpu::CompactionSource> parsed = gpu::ParseCompactionSource(value);
      if (!parsed) {
        std::fprintf(stderr, "--source must be channel or luma, got %s\n", value.c_str());
        std::exit(2);
      }
      source = *parsed;
    } else if (flag == "--variants") {
      variants = ParseVariants<gpu::CompactionVariant>(value, gpu::ParseCompactionVariant);
    } else {
      return false;
    }
    return true;
  });
  const int runs = args.runs, warmup = args.warmup;
  std::unique_ptr<gpu::Context> ctx = OpenContextOrExit(args);
  gpu::Context& c = *ctx;
  std::erase_if(variants, [&](gpu::CompactionVariant v) {
    const absl::Status s = gpu::CompactionVariantAvailable(c.info(), v);
    if (!s.ok()) std::fprintf(stderr, "left out: %s\n", std::string(s.message()).c_str());
    return !s.ok();
  });
  const double copy = CopyBandwidthGBs(c);

  std::vector<Row> rows;
  std::mt19937_64 rng(42);
  gpu::CompactionKernel kernel(c);
  if (absl::Status s = kernel.Prepare(gpu::SampleType::kUint8); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  for (int channels : channel_counts) {
    for (auto [w, h] : args.sizes) {
      // Channel 0 uniform in [0, 99] at random positions, so [0, s - 1] passes s% of the pixels.
      gpu::HostImage host = gpu::HostImage::Zeros({w, h, channels, gpu::SampleType::kUint8});
      for (size_t i = 0; i < host.data.size(); i += size_t(channels)) {
        const uint64_t r = rng();
        host.data[i] = uint8_t(r % 100);
        for (int k = 1; k < channels; ++k) host.data[i + size_t(k)] = uint8_t(r >> (8 * k));
      }
      const gpu::Image image = UploadOrExit(c, host);
      const double image_bytes = double(host.desc.bytes());
      const std::string size = StrCat(w, "x", h);
      for (int percent : percents) {
        for (bool count_only : {false, true}) {
          gpu::CompactionOptions o;
          o.source = source;
          o.channel = 0;
          o.lo = 0;
          o.hi = percent - 1;
          o.max_results = host.desc.pixels();
          o.count_only = count_only;
          if (source == gpu::CompactionSource::kLuma) {
            o.lo = LumaThreshold(host, percent);
            o.hi = 255;
          }
          const std::string params =
              StrCat(channels, "ch ", source == gpu::CompactionSource::kLuma ? "luma " : "",
                     percent, "%", count_only ? " count" : " list");
          gpu::CompactionResult expected;
          Timing cpu =
              Measure([&] { return WallMs([&] { expected = *reference::Compact(host, o); }); }, 0,
                      std::max(1, runs / 4));
          const double out_bytes = double(expected.returned()) * (8 + channels);
          const double bytes = image_bytes + out_bytes;
          rows.push_back({"compaction", "cpu_1_thread", size, params, cpu.median_ms,
                          bytes / (cpu.median_ms * 1e6), 0, cpu.runs});
          // Variants take turns, run after run, so that a change in the machine's load touches
          // them all alike.
          std::vector<std::vector<double>> api_ms(std::size(variants)), gpu_ms(std::size(variants));
          gpu::CompactionVariant auto_ran = gpu::CompactionVariant::kAuto;
          for (int run = 0; run < warmup + runs; ++run) {
            for (size_t i = 0; i < std::size(variants); ++i) {
              o.variant = variants[i];
              absl::StatusOr<gpu::CompactionResult> r;
              const double ms = WallMs([&] { r = kernel.Run(image, o); });
              if (!r.ok() || r->total != expected.total || r->xy != expected.xy ||
                  r->values != expected.values || r->truncated != expected.truncated) {
                std::fprintf(stderr, "variant %s disagrees with the CPU reference (%s, %s)\n",
                             std::string(gpu::CompactionVariantName(variants[i])).c_str(),
                             size.c_str(), params.c_str());
                return 1;
              }
              if (variants[i] == gpu::CompactionVariant::kAuto) auto_ran = r->variant;
              if (run < warmup) continue;
              api_ms[i].push_back(ms);
              gpu_ms[i].push_back(double(r->gpu_ns) / 1e6);
            }
          }
          for (size_t i = 0; i < std::size(variants); ++i) {
            std::fprintf(stderr, "%s %s %s: api %.2f ms, gpu %.2f ms (min api %.2f)\n",
                         size.c_str(), params.c_str(),
                         std::string(gpu::CompactionVariantName(variants[i])).c_str(),
                         Median(api_ms[i]), Median(gpu_ms[i]),
                         *std::min_element(api_ms[i].begin(), api_ms[i].end()));
            std::string name(gpu::CompactionVariantName(variants[i]));
            if (variants[i] == gpu::CompactionVariant::kAuto) {
              name = StrCat("auto=", gpu::CompactionVariantName(auto_ran));
            }
            const double api = Median(api_ms[i]), gpu = Median(gpu_ms[i]);
            rows.push_back({"compaction", name, size, params + " api", api, bytes / (api * 1e6),
                            bytes / (api * 1e6) / copy, runs});
            // Count-only runs read nothing back but the total: their GPU time is the API time.
            if (count_only) continue;
            rows.push_back({"compaction", name, size, params + " gpu", gpu, bytes / (gpu * 1e6),
                            bytes / (gpu * 1e6) / copy, runs});
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
