#include "server/compaction.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpu/str.h"

namespace glimpse::server {
namespace {

constexpr uint64_t kChunkOverhead = 32;
constexpr uint64_t kEndsBytes = 4096;

uint64_t ValueBytes(const gpu::ImageDesc& d) {
  return uint64_t(d.channels) * gpu::BytesPerSample(d.type);
}

}  // namespace

absl::StatusOr<gpu::CompactionOptions> CompactionAnalysis::MapOptions(const Request& request) {
  const v1::CompactOptions& o = request.options();
  Options options;
  switch (o.source()) {
    case v1::COMPACT_SOURCE_UNSPECIFIED:
      break;
    case v1::COMPACT_SOURCE_CHANNEL:
      options.source = gpu::CompactionSource::kChannel;
      break;
    case v1::COMPACT_SOURCE_LUMA:
      options.source = gpu::CompactionSource::kLuma;
      break;
    default:
      return absl::InvalidArgumentError(
          StrCat("options.source must be a CompactionSource (0-2), got ", int(o.source())));
  }
  options.channel = int(std::min<uint32_t>(o.channel(), INT_MAX));
  options.lo = o.lo();
  options.hi = o.hi();
  options.inside = !o.outside();
  if (o.has_max_results()) options.max_results = o.max_results();
  options.count_only = o.count_only();
  absl::StatusOr<gpu::CompactionVariant> variant = ParseVariant<gpu::CompactionVariant>(
      request.variant(), "compaction", gpu::CompactionVariantName, gpu::ParseCompactionVariant);
  if (!variant.ok()) return variant.status();
  options.variant = *variant;
  return options;
}

absl::StatusOr<uint64_t> CompactionAnalysis::ResultBytes(const gpu::ImageDesc& desc,
                                                         const Options& options, uint64_t) {
  absl::StatusOr<Options> resolved = gpu::ResolveCompactionOptions(desc, options);
  if (!resolved.ok()) return resolved.status();
  if (resolved->count_only) return kEndsBytes;
  const uint64_t pixels = std::min<uint64_t>(uint64_t(resolved->max_results),
                                             uint64_t(desc.width) * uint64_t(desc.height));
  // The list read back and the messages made from it exist together for a moment.
  return 2 * pixels * (8 + ValueBytes(desc)) + pixels / 1024 * kChunkOverhead + kEndsBytes;
}

absl::Status CompactionAnalysis::Run(const StreamWork<Response>& work, GpuEnv& env,
                                     const Acquired& image, const Options& options, Lease lease) {
  const gpu::ImageDesc desc = image.image->desc();
  absl::StatusOr<gpu::CompactionResult> r = env.kernels.compaction.Run(*image.image, options);
  if (!r.ok()) return r.status();
  work.call->record.set_gpu_ns(r->gpu_ns);
  work.call->record.set_analysis(kName, gpu::CompactionVariantName(r->variant));
  const uint64_t value_bytes = ValueBytes(desc);
  const size_t per_chunk =
      std::max<size_t>(1, work.service->limits.chunk_bytes / (8 + value_bytes));
  const size_t returned = r->returned();
  const uint64_t list_bytes =
      returned * (8 + value_bytes) + (returned / per_chunk + 1) * kChunkOverhead + kEndsBytes;
  lease.ShrinkTo(2 * list_bytes);
  auto result = std::make_shared<gpu::CompactionResult>(*std::move(r));
  auto info = std::make_shared<v1::ImageInfo>(image.info);
  auto held = std::make_shared<Lease>(std::move(lease));
  // Cutting the list into messages is host work: off the GPU thread.
  work.service->pool.Post(
      [call = work.call, result, info, held, desc, value_bytes, per_chunk, list_bytes] {
        const size_t n_total = result->returned();
        std::vector<v1::CompactResponse> messages;
        v1::CompactHeader* h = messages.emplace_back().mutable_header();
        *h->mutable_image() = *info;
        h->set_total(result->total);
        h->set_returned(n_total);
        h->set_truncated(result->truncated);
        h->set_value_format(ToProto(desc.type));
        h->set_value_channels(uint32_t(desc.channels));
        h->set_variant(std::string(gpu::CompactionVariantName(result->variant)));
        for (size_t i = 0; i < n_total; i += per_chunk) {
          const size_t n = std::min(per_chunk, n_total - i);
          v1::CompactChunk* c = messages.emplace_back().mutable_chunk();
          c->set_first(i);
          c->set_xy(reinterpret_cast<const char*>(result->xy.data() + 2 * i), n * 8);
          c->set_values(reinterpret_cast<const char*>(result->values.data()) + i * value_bytes,
                        n * value_bytes);
        }
        *messages.emplace_back().mutable_timing() = call->record.Timing();
        result->xy = {};
        result->values = {};
        held->ShrinkTo(list_bytes);
        if (absl::Status s = call->Send(std::move(messages), std::move(*held)); !s.ok()) {
          return call->Close(s);
        }
        call->Close(absl::OkStatus());
      });
  return absl::OkStatus();
}

}  // namespace glimpse::server
