// CPU reference of gpu/box_filter.h: horizontal then vertical window sums over border-mapped
// indices (OpenCV's borderInterpolate, written as its loop), exact 64-bit integer sums (running)
// for 8/16-bit images and direct double sums for float images.
//
//   BoxFilterOptions options{.rx = 2, .ry = 1, .border = BorderMode::kReplicate};
//   absl::StatusOr<HostImage> want = reference::BoxFilter(host, options);
//   if (!want.ok()) return want.status();
//   BoxFilterKernel kernel(ctx);
//   absl::StatusOr<BoxFilterResult> got = kernel.Run(image, options);  // image: `host` uploaded
//   if (!got.ok()) return got.status();
//   const bool same = got->image.Download().data == want->data;  // exact for 8/16-bit images
#ifndef GLIMPSE_GPU_REFERENCE_BOX_FILTER_H_
#define GLIMPSE_GPU_REFERENCE_BOX_FILTER_H_

#include "absl/status/statusor.h"
#include "gpu/box_filter.h"
#include "gpu/image.h"

namespace glimpse::reference {

// The image index that extended index i reads along an axis of n samples, or -1 (kConstant).
int BorderIndex(int i, int n, gpu::BorderMode mode);

// Same options and errors as gpu::BoxFilterKernel::Run; the variant is ignored.
absl::StatusOr<gpu::HostImage> BoxFilter(const gpu::HostImage& image,
                                         const gpu::BoxFilterOptions& options);

}  // namespace glimpse::reference

#endif  // GLIMPSE_GPU_REFERENCE_BOX_FILTER_H_
