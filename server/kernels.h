// The kernels the GPU worker owns. Each analysis is compiled in when its gpu/ sources exist
// (GLIMPSE_HAVE_<NAME>, set by server/CMakeLists.txt); an absent one answers UNIMPLEMENTED.
#ifndef GLIMPSE_SERVER_KERNELS_H_
#define GLIMPSE_SERVER_KERNELS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gpu/context.h"
#include "gpu/histogram.h"
#if GLIMPSE_HAVE_INTEGRAL
#include "gpu/integral_image.h"
#endif
#if GLIMPSE_HAVE_BOX_FILTER
#include "gpu/box_filter.h"
#endif
#if GLIMPSE_HAVE_COMPACTION
#include "gpu/compaction.h"
#endif

namespace glimpse::server {

// REQUIRES: created, used and destroyed on the context's thread.
struct Kernels {
  explicit Kernels(gpu::Context& ctx)
      : histogram(ctx)
#if GLIMPSE_HAVE_INTEGRAL
        ,
        integral(ctx)
#endif
#if GLIMPSE_HAVE_BOX_FILTER
        ,
        box_filter(ctx)
#endif
#if GLIMPSE_HAVE_COMPACTION
        ,
        compaction(ctx)
#endif
  {
  }

  // Compiles every program of every kernel for every sample type: a broken shader is a start-up
  // error, and the first call does not pay for compilation.
  absl::Status Prepare();

  // Names of the analyses compiled in ("histogram", ...).
  static std::vector<std::string> Available();

  gpu::HistogramKernel histogram;
#if GLIMPSE_HAVE_INTEGRAL
  gpu::IntegralImageKernel integral;
#endif
#if GLIMPSE_HAVE_BOX_FILTER
  gpu::BoxFilterKernel box_filter;
#endif
#if GLIMPSE_HAVE_COMPACTION
  gpu::CompactionKernel compaction;
#endif
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_KERNELS_H_
