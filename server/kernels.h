// The kernels the GPU worker owns, and the table of the analyses the server serves.
#ifndef GLIMPSE_SERVER_KERNELS_H_
#define GLIMPSE_SERVER_KERNELS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "gpu/box_filter.h"
#include "gpu/compaction.h"
#include "gpu/context.h"
#include "gpu/histogram.h"
#include "gpu/integral_image.h"

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
  // The names an analysis's `variant` field takes, "auto" first; empty for an unknown analysis.
  static std::vector<std::string> Variants(std::string_view analysis);

  gpu::Context& ctx;
  gpu::HistogramKernel histogram;
  gpu::IntegralImageKernel integral_image;
  gpu::CompactionKernel compaction;
  gpu::BoxFilterKernel box_filter;
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_KERNELS_H_
