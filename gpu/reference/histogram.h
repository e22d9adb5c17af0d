// CPU reference of gpu/histogram.h: the same rule, one pixel at a time.
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
