// The box filter analysis: BoxFilterRequest -> gpu::BoxFilterOptions, the kernel on the worker,
// the result kept in the store and/or its pixels (raw or PNG, encoded on a host thread) streamed.
//
//   // The BoxFilter RPC (server/service.cc): the runner takes every step below.
//   return ServeStream<BoxFilterAnalysis>(env_, context, *request);  // the request's bytes
//   // Its first step, the request mapped to gpu/'s options:
//   absl::StatusOr<BoxFilterAnalysis::Options> options = BoxFilterAnalysis::MapOptions(*request);
//   if (!options.ok()) return options.status();  // options->filter.rx, ->encoding, ->keep
#ifndef GLIMPSE_SERVER_ANALYSES_BOX_FILTER_H_
#define GLIMPSE_SERVER_ANALYSES_BOX_FILTER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "glimpse/v1/image_analytics.pb.h"
#include "gpu/box_filter.h"
#include "server/analyses/runner.h"
#include "server/ingest/image_ref.h"
#include "server/worker/gpu_env.h"

namespace glimpse::server {

struct BoxFilterAnalysis {
  static constexpr std::string_view kName = "box_filter";
  static constexpr std::string_view kMethod = "BoxFilter";
  using Request = v1::BoxFilterRequest;
  using Response = v1::BoxFilterResponse;
  struct Options {
    gpu::BoxFilterOptions filter;
    v1::PixelEncoding encoding = v1::PIXEL_ENCODING_NONE;
    bool keep = false;
    std::string label;
  };

  // Kernel, Variants: as server/analyses/registry.h says.
  static gpu::BoxFilterKernel& Kernel(Kernels& kernels) { return kernels.box_filter; }
  static std::vector<std::string> Variants(const gpu::DeviceInfo& device);

  static absl::StatusOr<Options> MapOptions(const Request& request);
  // Checks with gpu/; the pixels returned (raw, or PNG's worst case and the raw pixels it is
  // made from).
  static absl::StatusOr<uint64_t> ResultBytes(const gpu::ImageDesc& desc, const Options& options,
                                              uint64_t part_bytes);
  static absl::Status Run(const StreamWork<Response>& work, GpuEnv& env, const Acquired& image,
                          const Options& options, Lease lease);

 private:
  static absl::Status StreamRaw(const StreamWork<Response>& work, GpuEnv& env,
                                const Acquired& image, const Options& options, Lease lease);
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_ANALYSES_BOX_FILTER_H_
