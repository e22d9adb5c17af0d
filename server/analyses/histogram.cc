#include "server/analyses/histogram.h"

#include <climits>
#include <string>
#include <vector>

#include "common/str.h"
#include "server/analyses/runner.h"

namespace glimpse::server {

absl::StatusOr<gpu::HistogramOptions> HistogramAnalysis::MapOptions(const Request& request) {
  const v1::HistogramOptions& o = request.options();
  Options options;
  // Values past int's range saturate, so gpu/'s range check names a value that is still too big.
  if (o.bins() != 0) options.bins = int(std::min<uint32_t>(o.bins(), INT_MAX));
  if (o.has_lo()) options.lo = o.lo();
  if (o.has_hi()) options.hi = o.hi();
  switch (o.source()) {
    case v1::HISTOGRAM_SOURCE_UNSPECIFIED:
      break;
    case v1::HISTOGRAM_SOURCE_ALL_CHANNELS:
      options.source = gpu::HistogramSource::kAllChannels;
      break;
    case v1::HISTOGRAM_SOURCE_CHANNEL:
      options.source = gpu::HistogramSource::kChannel;
      break;
    case v1::HISTOGRAM_SOURCE_LUMA:
      options.source = gpu::HistogramSource::kLuma;
      break;
    case v1::HISTOGRAM_SOURCE_RGB_MEAN:
      options.source = gpu::HistogramSource::kRgbMean;
      break;
    default:
      return absl::InvalidArgumentError(
          StrCat("options.source must be a HistogramSource (0-4), got ", int(o.source())));
  }
  options.channel = int(std::min<uint32_t>(o.channel(), INT_MAX));
  absl::StatusOr<gpu::HistogramVariant> variant = ParseVariant<gpu::HistogramVariant>(
      request.variant(), "the histogram", gpu::HistogramVariantName, gpu::ParseHistogramVariant);
  if (!variant.ok()) return variant.status();
  options.variant = *variant;
  return options;
}

absl::StatusOr<uint64_t> HistogramAnalysis::ResultBytes(const gpu::ImageDesc& desc,
                                                        const Options& options, uint64_t) {
  absl::StatusOr<Options> resolved = gpu::ResolveHistogramOptions(desc, options);
  if (!resolved.ok()) return resolved.status();
  const uint64_t histograms =
      resolved->source == gpu::HistogramSource::kAllChannels ? uint64_t(desc.channels) : 1;
  // Up to 10 bytes per varint count, and the message around them.
  return histograms * uint64_t(resolved->bins) * 10 + 1024;
}

absl::Status HistogramAnalysis::Run(GpuEnv& env, const Acquired& image, const Options& options,
                                    CallRecord& record, Response* response) {
  absl::StatusOr<gpu::HistogramResult> r = env.kernels.histogram.Run(*image.image, options);
  if (!r.ok()) return r.status();
  Answer(*r, record, response);
  return absl::OkStatus();
}

void HistogramAnalysis::Answer(const gpu::HistogramResult& r, CallRecord& record,
                               Response* response) {
  record.set_gpu_ns(r.gpu_ns);
  record.set_analysis(kName, gpu::HistogramVariantName(r.variant));
  response->set_bins(uint32_t(r.bins));
  response->set_lo(r.lo);
  response->set_hi(r.hi);
  uint64_t total = 0;
  for (const std::vector<uint64_t>& counts : r.counts) {
    auto* h = response->add_histograms();
    h->mutable_counts()->Add(counts.begin(), counts.end());
    for (uint64_t c : counts) total += c;
  }
  response->set_total(total);
  response->set_variant(std::string(gpu::HistogramVariantName(r.variant)));
}

std::vector<std::string> HistogramAnalysis::Variants(const gpu::DeviceInfo&) {
  return VariantNames<gpu::HistogramVariant>(gpu::HistogramVariantName, gpu::ParseHistogramVariant);
}

}  // namespace glimpse::server
