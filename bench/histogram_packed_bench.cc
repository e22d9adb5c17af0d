// Times histograms of many small images: one HistogramKernel::RunPacked call (one upload, one
// dispatch, one read-back per atlas) against an Image::Upload + Run per image, the same images
// and options in the same run. Host wall time per image (uploads and read-backs included: for
// small images they are most of the cost), and GPU time per image (timer queries), medians.
//
//   histogram_packed_bench [--images 64] [--sizes 256x256[,128x96]] [--variants auto,...]
//                          [--configs all,luma] [--atlas-kib N] [--runs N] [--warmup N] [--json
//                          FILE]
//                          [--device auto|software|N]
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "common/str.h"
#include "gpu/histogram.h"

namespace glimpse::bench {
namespace {

int Main(int argc, char** argv) {
  BenchArgs args;
  args.runs = 9;
  args.large_runs = 9;
  args.warmup = 2;
  args.sizes = {{256, 256}};
  int images = 64;
  size_t atlas_bytes = 0;  // 0: the kernel's default
  std::vector<gpu::HistogramVariant> variants = {gpu::HistogramVariant::kAuto};
  std::vector<std::string> config_names = {"all", "luma"};
  ParseBenchArgs(argc, argv, &args, [&](const std::string& flag, const std::string& value) {
    if (flag == "--images") {
      images = std::max(1, std::atoi(value.c_str()));
      return true;
    }
    if (flag == "--atlas-kib") {  // HistogramKernel::set_atlas_limits: bytes of one atlas
      atlas_bytes = size_t(std::max(1, std::atoi(value.c_str()))) << 10;
      return true;
    }
    if (flag == "--configs") {
      config_names = SplitCommas(value);
      return true;
    }
    if (flag != "--variants") return false;
    variants = ParseVariants<gpu::HistogramVariant>(value, gpu::ParseHistogramVariant);
    return true;
  });
  std::unique_ptr<gpu::Context> ctx = OpenContextOrExit(args);
  gpu::Context& c = *ctx;

  std::vector<Row> rows;
  std::mt19937_64 rng(42);
  gpu::HistogramKernel kernel(c);
  kernel.set_atlas_limits(atlas_bytes, 0);
  for (auto [w, h] : args.sizes) {
    // Photo-like thumbnails: smooth gradients plus noise, each image its own.
    std::vector<gpu::HostImage> hosts;
    for (int i = 0; i < images; ++i) {
      gpu::HostImage host = gpu::HostImage::Zeros({w, h, 3, gpu::SampleType::kUint8});
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
          for (int ch = 0; ch < 3; ++ch) {
            int v = (x * 255 / w + y * 255 / h + ch * 40 + i * 7) / 2 + int(rng() % 9) - 4;
            host.set<uint8_t>(x, y, ch, uint8_t(std::clamp(v, 0, 255)));
          }
        }
      }
      hosts.push_back(std::move(host));
    }
    std::vector<gpu::PackedImage> pack;
    for (const gpu::HostImage& host : hosts) pack.push_back({host.desc, host.data, {}});
    const double bytes = double(hosts[0].desc.bytes());
    const std::string size = StrCat(w, "x", h, "x3 (", images, " images)");

    for (const std::string& name : config_names) {
      gpu::HistogramOptions options;
      std::string label;
      if (name == "all") {
        options.source = gpu::HistogramSource::kAllChannels;
        label = "all 256 bins";
      } else if (name == "luma") {
        options.source = gpu::HistogramSource::kLuma;
        label = "luma 256 bins";
      } else {
        std::fprintf(stderr, "--configs: unknown configuration %s (all, luma)\n", name.c_str());
        return 2;
      }
      for (gpu::HistogramVariant v : variants) {
        gpu::HistogramOptions o = options;
        o.variant = v;
        bool ok = true;
        gpu::HistogramVariant ran = v;
        std::vector<std::vector<std::vector<uint64_t>>> packed_counts(hosts.size()),
            separate_counts(hosts.size());
        std::vector<double> packed_gpu, separate_gpu;
        int dispatches = 0;
        const Timing packed = Measure(
            [&] {
              uint64_t gpu_ns = 0;
              const double ms = WallMs([&] {
                absl::StatusOr<gpu::PackedHistograms> r = kernel.RunPacked(pack, o);
                if (!r.ok()) {
                  ok = false;
                  return;
                }
                gpu_ns = r->gpu_ns;
                dispatches = r->dispatches;
                for (size_t i = 0; i < hosts.size(); ++i) {
                  if (!r->results[i].ok()) {
                    ok = false;
                    continue;
                  }
                  ran = r->results[i]->variant;
                  packed_counts[i] = std::move(r->results[i]->counts);
                }
              });
              packed_gpu.push_back(double(gpu_ns) / 1e6 / images);
              return ms / images;
            },
            args.warmup, args.runs);
        const Timing separate = Measure(
            [&] {
              uint64_t gpu_ns = 0;
              const double ms = WallMs([&] {
                for (size_t i = 0; i < hosts.size(); ++i) {
                  absl::StatusOr<gpu::Image> image = gpu::Image::Upload(c, hosts[i]);
                  if (!image.ok()) {
                    ok = false;
                    return;
                  }
                  absl::StatusOr<gpu::HistogramResult> r = kernel.Run(*image, o);
                  if (!r.ok()) {
                    ok = false;
                    return;
                  }
                  gpu_ns += r->gpu_ns;
                  separate_counts[i] = std::move(r->counts);
                }
              });
              separate_gpu.push_back(double(gpu_ns) / 1e6 / images);
              return ms / images;
            },
            args.warmup, args.runs);
        if (!ok || packed_counts != separate_counts) {
          std::fprintf(stderr, "variant %s: packed and separate histograms differ (or failed)\n",
                       std::string(gpu::HistogramVariantName(v)).c_str());
          return 1;
        }
        std::string vname(gpu::HistogramVariantName(v));
        if (v == gpu::HistogramVariant::kAuto) {
          vname = StrCat("auto=", gpu::HistogramVariantName(ran));
        }
        const Timing pg = Summarize(packed_gpu), sg = Summarize(separate_gpu);
        auto row = [&](const std::string& what, const Timing& t) {
          rows.push_back({"histogram", vname, size, StrCat(label, ", ", what), t.median_ms,
                          bytes / (t.median_ms * 1e6), 0, t.runs});
        };
        row(StrCat("packed wall/image (", dispatches, " dispatches)"), packed);
        row("separate wall/image", separate);
        row("packed gpu/image", pg);
        row("separate gpu/image", sg);
      }
    }
  }
  Report(c, 0, rows, args.json, argc, argv);
  return 0;
}

}  // namespace
}  // namespace glimpse::bench

int main(int argc, char** argv) { return glimpse::bench::Main(argc, argv); }
