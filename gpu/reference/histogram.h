// CPU reference of gpu/histogram.h: the same rule, one pixel at a time.
//
//   HistogramOptions options;
//   options.bins = 7;
//   absl::StatusOr<HistogramResult> want = reference::Histogram(host, options);
//   if (!want.ok()) return want.status();
//   HistogramKernel kernel(ctx);
//   absl::StatusOr<HistogramResult> got = kernel.Run(image, options);  // image: `host` uploaded
//   if (!got.ok()) return got.status();
//   const bool same = got->counts == want->counts;  // exact, whatever the variant
#ifndef GLIMPSE_GPU_REFERENCE_HISTOGRAM_H_
#define GLIMPSE_GPU_REFERENCE_HISTOGRAM_H_

#include "absl/status/statusor.h"
#include "gpu/histogram.h"
#include "gpu/image.h"

namespace glimpse::reference {

// Same options and errors as gpu::HistogramKernel::Run; the variant is ignored.
absl::StatusOr<gpu::HistogramResult> Histogram(const gpu::HostImage& image,
                                               const gpu::HistogramOptions& options);

}  // namespace glimpse::reference

#endif  // GLIMPSE_GPU_REFERENCE_HISTOGRAM_H_
