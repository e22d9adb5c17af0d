// The histogram analysis: HistogramRequest -> gpu::HistogramOptions, the kernel on the worker, the
// counts in the response.
//
//   // The Histogram RPC (server/service.cc): the runner takes every step below.
//   return ServeUnary<HistogramAnalysis>(env_, context, *request, response);  // request: bytes
//   // Its first steps: the request mapped, then checked against the image.
//   absl::StatusOr<HistogramAnalysis::Options> options = HistogramAnalysis::MapOptions(*request);
//   if (!options.ok()) return options.status();
//   absl::StatusOr<uint64_t> bytes = HistogramAnalysis::ResultBytes(desc, *options, part_bytes);
//   if (!bytes.ok()) return bytes.status();  // e.g. luma of a 1-channel image
#ifndef GLIMPSE_SERVER_ANALYSES_HISTOGRAM_H_
#define GLIMPSE_SERVER_ANALYSES_HISTOGRAM_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "glimpse/v1/image_analytics.pb.h"
#include "gpu/histogram.h"
#include "server/ingest/image_ref.h"
#include "server/rpc/call.h"
#include "server/worker/gpu_env.h"

namespace glimpse::server {

struct HistogramAnalysis {
  static constexpr std::string_view kName = "histogram";
  static constexpr std::string_view kMethod = "Histogram";
  using Request = v1::HistogramRequest;
  using Response = v1::HistogramResponse;
  using Options = gpu::HistogramOptions;

  // Kernel, Variants: as server/analyses/registry.h says.
  static gpu::HistogramKernel& Kernel(Kernels& kernels) { return kernels.histogram; }
  static std::vector<std::string> Variants(const gpu::DeviceInfo& device);

  // Maps values only: unset fields (bins 0, no lo/hi, source UNSPECIFIED) keep gpu/'s defaults,
  // and gpu/ checks the ranges.
  static absl::StatusOr<Options> MapOptions(const Request& request);
  // Checks the options against the image (gpu/'s rules); the counts' bytes.
  static absl::StatusOr<uint64_t> ResultBytes(const gpu::ImageDesc& desc, const Options& options,
                                              uint64_t part_bytes);
  static absl::Status Run(GpuEnv& env, const Acquired& image, const Options& options,
                          CallRecord& record, Response* response);
  // The kernel's result as the response's counts (Run's answer, and each image's of a pack:
  // server/analyses/histogram_packs.h), its GPU time and variant recorded.
  static void Answer(const gpu::HistogramResult& result, CallRecord& record, Response* response);
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_ANALYSES_HISTOGRAM_H_
