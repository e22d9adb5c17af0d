// The kernels the GPU worker owns, and the table of the analyses the server serves.
//
//   Kernels kernels(ctx);  // on ctx's thread
//   if (absl::Status s = kernels.Prepare(); !s.ok()) return s;  // a shader that does not build
//   const int threads = AutoWarmUpThreads(ctx.info());
//   if (absl::Status s = WarmUpSideBySide(kernels, context_options, threads); !s.ok()) return s;
//   absl::StatusOr<gpu::HistogramResult> r = kernels.histogram.Run(image, histogram_options);
//   if (!r.ok()) return r.status();
#ifndef GLIMPSE_SERVER_ANALYSES_KERNELS_H_
#define GLIMPSE_SERVER_ANALYSES_KERNELS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "gpu/box_filter.h"
#include "gpu/compaction.h"
#include "gpu/context.h"
#include "gpu/histogram.h"
#include "gpu/integral_image.h"
#include "gpu/warm_up.h"

namespace glimpse::server {

// REQUIRES: created, used and destroyed on the context's thread.
struct Kernels {
  explicit Kernels(gpu::Context& context)
      : ctx(context),
        histogram(context),
        integral_image(context),
        compaction(context),
        box_filter(context) {}

  // The worker's one start-up step: compiles every program of every kernel for every sample
  // type, so a broken shader is a start-up error and the first call does not pay for compiling.
  absl::Status Prepare();

  // Names of the analyses served, as in gpu/ and the proto: "histogram", "integral_image", ...
  static std::vector<std::string> Available();
  // Builds and runs once every program `auto` can pick on this device (WorkerOptions::warm_up);
  // logs each analysis's share of the time.
  absl::Status WarmUp();
  // The units of that warm-up which `share` claims (gpu/warm_up.h); logs nothing.
  absl::Status WarmUp(gpu::WarmUpShare& share);
  // The names an analysis's `variant` field takes on `device`, "auto" first; empty for an unknown
  // analysis.
  static std::vector<std::string> Variants(std::string_view analysis,
                                           const gpu::DeviceInfo& device);

  gpu::Context& ctx;
  gpu::HistogramKernel histogram;
  gpu::IntegralImageKernel integral_image;
  gpu::CompactionKernel compaction;
  gpu::BoxFilterKernel box_filter;
};

// How many contexts compile the start-up warm-up side by side, the serving one included, when
// WorkerOptions::warm_up_threads is 0 (auto): on CPU renderers whose shader cache on disk is on,
// the CPUs this process may use (its affinity and cgroup CPU quota), at most kMaxWarmUpThreads;
// else 1. Only Mesa's disk cache carries a helper's compiled code to the serving context.
inline constexpr int kMaxWarmUpThreads = 8;
int AutoWarmUpThreads(const gpu::DeviceInfo& device);

// Kernels::WarmUp() of the serving context `kernels`, after `threads` - 1 helper threads, each
// with a context of its own on `options.device`, have compiled their shares of it beside this
// context's own share: the serving context then finds their code in the driver's shader cache.
// A helper that fails only logs it (its units are then built here). REQUIRES: kernels' thread.
absl::Status WarmUpSideBySide(Kernels& kernels, gpu::ContextOptions options, int threads);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_ANALYSES_KERNELS_H_
