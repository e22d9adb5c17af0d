#include "server/kernels.h"

#include "gpu/str.h"
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
  std::vector<std::string> (*variants)();
};
constexpr AnalysisEntry kAnalyses[] = {
    {HistogramAnalysis::kName,
     [](Kernels& k, gpu::SampleType t) { return k.histogram.Prepare(t); },
     [] {
       return VariantNames<gpu::HistogramVariant>(gpu::HistogramVariantName,
                                                  gpu::ParseHistogramVariant);
     }},
    {IntegralImageAnalysis::kName,
     [](Kernels& k, gpu::SampleType t) { return k.integral_image.Prepare(t); },
     [] {
       return VariantNames<gpu::IntegralVariant>(gpu::IntegralVariantName,
                                                 gpu::ParseIntegralVariant);
     }},
    {CompactionAnalysis::kName,
     [](Kernels& k, gpu::SampleType t) { return k.compaction.Prepare(t); },
     [] {
       return VariantNames<gpu::CompactVariant>(gpu::CompactVariantName, gpu::ParseCompactVariant);
     }},
    {BoxFilterAnalysis::kName,
     [](Kernels& k, gpu::SampleType t) { return k.box_filter.Prepare(t); },
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
