// The kernels the GPU worker owns.
#ifndef GLIMPSE_SERVER_KERNELS_H_
#define GLIMPSE_SERVER_KERNELS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpu/context.h"
#include "gpu/histogram.h"
#include "gpu/integral_image.h"
#include "gpu/box_filter.h"
#include "gpu/compaction.h"

namespace glimpse::server {

// REQUIRES: created, used and destroyed on the context's thread.
struct Kernels {
  explicit Kernels(gpu::Context& ctx)
      : histogram(ctx), integral(ctx), box_filter(ctx), compaction(ctx) {}

  // Compiles every program of every kernel for every sample type: a broken shader is a start-up
  // error, and the first call does not pay for compilation.
  absl::Status Prepare();

  // Names of the analyses served ("histogram", ...).
  static std::vector<std::string> Available();

  gpu::HistogramKernel histogram;
  gpu::IntegralImageKernel integral;
  gpu::BoxFilterKernel box_filter;
  gpu::CompactionKernel compaction;
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_KERNELS_H_
