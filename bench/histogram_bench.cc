// Times every histogram variant with GL timer queries and prints the classic comparison table (CPU
// 1 thread, GPU global atomics, GPU shared, GPU shared + per-thread, plus private rows and private
// array) at 3200x2400 and 8K, for 16 bins of the RGB mean, 256 bins of each channel and 256 of
// luma.
//   histogram_bench [--runs N] [--large-runs N] [--warmup N] [--sizes 3200x2400,7680x4320]
//                   [--channels 4[,3,1]] [--types uint8[,uint16]]
//                   [--variants a,b,...] [--configs rgb_mean,all,luma] [--calls 1]
//                   [--json FILE] [--device auto|software|N]
// --calls 1 adds a "+call" row after each variant's: the wall time of the whole call (the
// dispatches, the read-back and whatever the host does with the counts), which for small images
// is mostly the per-call fixed cost the GPU time leaves out.
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
#include "gpu/histogram.h"
#include "gpu/reference/histogram.h"

namespace glimpse::bench {
namespace {

// Every channel count with every sample type, channels first.
std::vector<std::pair<int, gpu::SampleType>> ChannelsAndTypes(
    const std::vector<int>& channels, const std::vector<gpu::SampleType>& types) {
  std::vector<std::pair<int, gpu::SampleType>> out;
  for (int c : channels) {
    for (gpu::SampleType t : types) out.emplace_back(c, t);
  }
  return out;
}

struct Config {
  const char* label;
  gpu::HistogramOptions options;
};

int Main(int argc, char** argv) {
  BenchArgs args;
  args.runs = 15;
  args.large_runs = 15;
  args.warmup = 3;
  std::vector<gpu::HistogramVariant> variants = {
      gpu::HistogramVariant::kGlobalAtomics,   gpu::HistogramVariant::kSharedAtomics,
      gpu::HistogramVariant::kSharedPerThread, gpu::HistogramVariant::kPrivateRows,
      gpu::HistogramVariant::kPrivateArray,    gpu::HistogramVariant::kAuto};
  std::vector<std::string> config_names = {"rgb_mean", "all", "luma"};
  std::vector<int> channel_counts = {4};
  std::vector<gpu::SampleType> types = {gpu::SampleType::kUint8};
  bool calls = false;
  ParseBenchArgs(argc, argv, &args, [&](const std::string& flag, const std::string& value) {
    if (flag == "--calls") {
      calls = value == "1";
      return true;
    }
    if (flag == "--types") {  // uint8, uint16 (the same image, samples scaled by 257)
      types.clear();
      for (const std::string& name : SplitCommas(value)) {
        if (name != "uint8" && name != "uint16") {
          std::fprintf(stderr, "--types: unknown sample type %s (uint8, uint16)\n", name.c_str());
          std::exit(2);
        }
        types.push_back(name == "uint8" ? gpu::SampleType::kUint8 : gpu::SampleType::kUint16);
      }
      return true;
    }
    if (flag == "--channels") {
      channel_counts = ParseInts(value);
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
  const double copy = CopyBandwidthGBs(c);

  // The classic GPU-course histogram: 16 bins of the RGB mean. The usual ones: 256 bins per
  // channel, of luma.
  std::vector<Config> configs;
  for (const std::string& name : config_names) {
    Config cfg;
    if (name == "rgb_mean") {
      cfg.label = "rgb_mean 16 bins";
      cfg.options.bins = 16;
      cfg.options.source = gpu::HistogramSource::kRgbMean;
    } else if (name == "all") {
      cfg.label = "all 256 bins";
      cfg.options.source = gpu::HistogramSource::kAllChannels;
    } else if (name == "luma") {
      cfg.label = "luma 256 bins";
      cfg.options.source = gpu::HistogramSource::kLuma;
    } else {
      std::fprintf(stderr, "--configs: unknown configuration %s (rgb_mean, all, luma)\n",
                   name.c_str());
      return 2;
    }
    configs.push_back(cfg);
  }

  std::vector<Row> rows;
  std::mt19937_64 rng(42);
  gpu::HistogramKernel kernel(c);
  for (auto [w, h] : args.sizes) {
    for (auto [channels, type] : ChannelsAndTypes(channel_counts, types)) {
      gpu::HostImage host = gpu::HostImage::Zeros({w, h, channels, type});
      // A photo-like image: smooth gradients plus noise, so runs of equal bins occur as in real
      // data.
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
          for (int ch = 0; ch < channels; ++ch) {
            int v = (x * 255 / w + y * 255 / h + ch * 40) / 2 + int(rng() % 9) - 4;
            const int clamped = std::clamp(v, 0, 255);
            if (type == gpu::SampleType::kUint8) {
              host.set<uint8_t>(x, y, ch, uint8_t(clamped));
            } else {
              host.set<uint16_t>(x, y, ch, uint16_t(clamped * 257));
            }
          }
        }
      }
      const gpu::Image image = UploadOrExit(c, host);
      const double bytes = double(host.desc.bytes());
      const std::string size =
          StrCat(w, "x", h, "x", channels, type == gpu::SampleType::kUint16 ? " u16" : "");
      for (const Config& cfg : configs) {
        if (channels < 3 && cfg.options.source != gpu::HistogramSource::kAllChannels) continue;
        const int runs = args.RunsFor(w, h);
        const int cpu_runs = std::max(1, runs / 5);
        Timing cpu =
            Measure([&] { return WallMs([&] { (void)reference::Histogram(host, cfg.options); }); },
                    1, cpu_runs);
        rows.push_back({"histogram", "cpu_1_thread", size, cfg.label, cpu.median_ms,
                        bytes / (cpu.median_ms * 1e6), 0, cpu.runs});
        auto expected = reference::Histogram(host, cfg.options);
        for (gpu::HistogramVariant v : variants) {
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
          rows.push_back(
              {"histogram", name, size, cfg.label, t.median_ms, gbs, gbs / copy, t.runs});
          if (!calls) continue;
          Timing call = Measure([&] { return WallMs([&] { (void)kernel.Run(image, o); }); },
                                args.warmup, runs);
          const double call_gbs = bytes / (call.median_ms * 1e6);
          rows.push_back({"histogram", name + "+call", size, cfg.label, call.median_ms, call_gbs,
                          call_gbs / copy, call.runs});
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
