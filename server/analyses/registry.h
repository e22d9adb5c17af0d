// The analyses the server serves: one list, read by every table that names them. Each entry is
// the analysis's own type (server/analyses/histogram.h, ...), which owns its name (`kName`, as in
// gpu/, the proto's Analysis and AnalyzeResponse fields and the metrics), its worker kernel
// (`Kernel(kernels)`), the names its `variant` field takes on a device, "auto" first
// (`Variants(device)`), its options (`MapOptions`), its result size
// (`ResultBytes`) and how it runs. The kernels' start-up and warm-up (server/analyses/kernels.cc)
// Analyze and AnalyzeBatch (server/analyses/steps.h) walk this list; adding an analysis is one
// entry here plus its RPC in the service.
//
//   std::vector<std::string> names = kAnalyses.Names();  // "histogram", "integral_image", ...
//   template <typename... A> void PrepareAll(AnalysisList<A...>, Kernels& k, gpu::SampleType t) {
//     (A::Kernel(k).Prepare(t), ...);
//   }
#ifndef GLIMPSE_SERVER_ANALYSES_REGISTRY_H_
#define GLIMPSE_SERVER_ANALYSES_REGISTRY_H_

#include <string>
#include <vector>

#include "server/analyses/box_filter.h"
#include "server/analyses/compaction.h"
#include "server/analyses/histogram.h"
#include "server/analyses/integral_image.h"

namespace glimpse::server {

template <typename... A>
struct AnalysisList {
  static std::vector<std::string> Names() { return {std::string(A::kName)...}; }
};

// In the order the server lists them (ServerInfo, --help, errors naming the choices).
inline constexpr AnalysisList<HistogramAnalysis, IntegralImageAnalysis, CompactionAnalysis,
                              BoxFilterAnalysis>
    kAnalyses;

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_ANALYSES_REGISTRY_H_
