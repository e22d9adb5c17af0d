#include "server/kernels.h"

#include <chrono>
#include <iterator>

#include "gpu/str.h"
#include "spdlog/spdlog.h"
#include "server/box_filter.h"
#include "server/compaction.h"
#include "server/histogram.h"
#include "server/integral_image.h"
#include "server/runner.h"
#include "server/status_util.h"

namespace glimpse::server {
namespace {

// One line per analysis: its name and how its kernel is prepared.
struct AnalysisEntry {
  std::string_view name;
  absl::Status (*prepare)(Kernels& k, gpu::SampleType type);
  absl::Status (*warm_up)(Kernels& k);
  std::vector<std::string> (*variants)();
};
constexpr AnalysisEntry kAnalyses[] = {
    {HistogramAnalysis::kName,
     [](Kernels& k, gpu::SampleType t) { return k.histogram.Prepare(t); },
     [](Kernels& k) { return k.histogram.WarmUp(); },
     [] {
       return VariantNames<gpu::HistogramVariant>(gpu::HistogramVariantName,
                                                  gpu::ParseHistogramVariant);
     }},
    {IntegralImageAnalysis::kName,
     [](Kernels& k, gpu::SampleType t) { return k.integral_image.Prepare(t); },
     [](Kernels& k) { return k.integral_image.WarmUp(); },
     [] {
       return VariantNames<gpu::IntegralImageVariant>(gpu::IntegralImageVariantName,
                                                 gpu::ParseIntegralImageVariant);
     }},
    {CompactionAnalysis::kName,
     [](Kernels& k, gpu::SampleType t) { return k.compaction.Prepare(t); },
     [](Kernels& k) { return k.compaction.WarmUp(); },
     [] {
       return VariantNames<gpu::CompactionVariant>(gpu::CompactionVariantName, gpu::ParseCompactionVariant);
     }},
    {BoxFilterAnalysis::kName,
     [](Kernels& k, gpu::SampleType t) { return k.box_filter.Prepare(t); },
     [](Kernels& k) { return k.box_filter.WarmUp(); },
     [] {
       return VariantNames<gpu::BoxFilterVariant>(gpu::BoxFilterVariantName,
                                                  gpu::ParseBoxFilterVariant);
     }},
};

}  // namespace

absl::Status Kernels::Prepare() {
  for (gpu::SampleType type :
       {gpu::SampleType::kUint8, gpu::SampleType::kUint16, gpu::SampleType::kFloat32}) {
    for (const AnalysisEntry& a : kAnalyses) {
      if (absl::Status s = a.prepare(*this, type); !s.ok()) {
        return Annotate(
            s, StrCat("preparing the ", a.name, " kernel for ", gpu::SampleTypeName(type)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Kernels::WarmUp() {
  // Last in the table first: llvmpipe keeps a bounded set of compiled variants and culls the least
  // recently used past it, and the box filter's unrolled programs are by far the largest; warmed
  // last, the small and most used programs (histogram, compaction) are the ones that stay.
  for (auto it = std::rbegin(kAnalyses); it != std::rend(kAnalyses); ++it) {
    const AnalysisEntry& a = *it;
    const size_t built_before = ctx.programs_built();
    const auto t0 = std::chrono::steady_clock::now();
    if (absl::Status s = a.warm_up(*this); !s.ok()) {
      return Annotate(s, StrCat("warming up the ", a.name, " kernel"));
    }
    spdlog::info("warm-up: {} built and ran {} programs in {:.1f} s", a.name,
                 ctx.programs_built() - built_before,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return absl::OkStatus();
}

std::vector<std::string> Kernels::Available() {
  std::vector<std::string> names;
  for (const AnalysisEntry& a : kAnalyses) names.emplace_back(a.name);
  return names;
}

std::vector<std::string> Kernels::Variants(std::string_view analysis) {
  for (const AnalysisEntry& a : kAnalyses) {
    if (a.name == analysis) return a.variants();
  }
  return {};
}

}  // namespace glimpse::server
