#include "server/analyses/integral_image.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/str.h"
#include "server/analyses/runner.h"

namespace glimpse::server {
namespace {

// Framing of one chunk message beyond its data (field tags, lengths, y0, rows).
constexpr uint64_t kIntegralChunkOverhead = 32;

// What a streamed table set keeps between its parts. Only one part's job runs at a time.
struct PartState {
  IntegralPlan plan;
  gpu::IntegralImageOptions options;
  bool squared_phase = false;  // producing the squared table's parts
  int next_y = 0;
  std::vector<uint8_t> carry;  // the table's row next_y - 1 (the last one sent), 8-byte elements
  std::string variant;
};

absl::Status RunPart(const StreamWork<v1::IntegralImageResponse>& w, GpuEnv& env, const Acquired& a,
                     std::shared_ptr<PartState> st, Lease lease);

// Queues the next part once the reader has taken this one.
std::function<void()> NextPart(const StreamWork<v1::IntegralImageResponse>& w,
                               std::shared_ptr<PartState> st) {
  return [w, st] {
    if (w.call->cancelled()) return w.call->Close(absl::CancelledError("the client cancelled"));
    const int rows = std::min(st->plan.rows_per_part, w.input->desc.height - st->next_y);
    w.Continue(IntegralPartBytes(st->plan, rows, 1),
               [w, st](GpuEnv& env, const Acquired& a, Lease lease) {
                 return RunPart(w, env, a, st, std::move(lease));
               });
  };
}

absl::Status RunPart(const StreamWork<v1::IntegralImageResponse>& w, GpuEnv& env, const Acquired& a,
                     std::shared_ptr<PartState> st, Lease lease) {
  const gpu::ImageDesc& d = a.image->desc();
  if (d.width != w.input->desc.width || d.height != w.input->desc.height) {
    return absl::FailedPreconditionError("the image changed while its table was streaming");
  }
  const IntegralPlan& plan = st->plan;
  std::vector<v1::IntegralImageResponse> messages;
  if (st->next_y == 0 && !st->squared_phase) {
    v1::IntegralHeader* h = messages.emplace_back().mutable_header();
    *h->mutable_image() = a.info;
    h->set_width(uint32_t(d.width));
    h->set_height(uint32_t(d.height));
    h->set_channels(uint32_t(d.channels));
    h->set_element(gpu::IntegralElementFor(d.type) == gpu::IntegralElement::kUint64
                       ? v1::INTEGRAL_ELEMENT_UINT64
                       : v1::INTEGRAL_ELEMENT_FLOAT64);
    h->set_squared(st->options.squared);
    h->set_table_bytes(plan.row_bytes * uint64_t(d.height));
  }

  // The whole table at once, or its next part: rows [y0, y0 + rows) from the row above.
  const int y0 = st->next_y;
  const int rows = plan.whole ? d.height : std::min(plan.rows_per_part, d.height - y0);
  gpu::IntegralImageOptions options = st->options;
  if (!plan.whole) {
    options.squared = st->squared_phase;
    options.sum_table = !st->squared_phase;
    options.first_row = y0;
    options.rows = rows;
    if (y0 > 0) options.carry_row = st->carry;
    // The kernel's own host band need not be larger than the part.
    options.band_bytes = int64_t(plan.row_bytes) * rows;
  }
  const int rows_per_chunk =
      int(std::max<uint64_t>(1, w.service->limits.chunk_bytes / plan.row_bytes));
  absl::StatusOr<gpu::IntegralImageResult> r = env.kernels.integral_image.Run(
      *a.image, options, [&](const gpu::IntegralBand& band) -> absl::Status {
        for (int y = 0; y < band.rows; y += rows_per_chunk) {
          const int n = std::min(rows_per_chunk, band.rows - y);
          v1::IntegralChunk* c = messages.emplace_back().mutable_chunk();
          c->set_squared(band.squared);
          c->set_y0(uint32_t(band.y0 + y));
          c->set_rows(uint32_t(n));
          std::string* data = c->mutable_data();
          if (band.rebuilt()) {  // rebuilt straight into the message
            data->resize(n * plan.row_bytes);
            band.CopyRows(y, n, reinterpret_cast<uint8_t*>(data->data()));
          } else {  // copied once, without zero-filling the message first
            data->assign(reinterpret_cast<const char*>(band.bytes().data()) + y * plan.row_bytes,
                         n * plan.row_bytes);
          }
        }
        return absl::OkStatus();
      });
  if (!r.ok()) return r.status();
  if (!plan.whole) {  // the part's last row carries into the next
    const std::string& last = messages.back().chunk().data();
    st->carry.assign(last.end() - std::ptrdiff_t(plan.row_bytes), last.end());
  }
  w.call->record.add_gpu_ns(r->gpu_ns);
  if (st->variant.empty()) st->variant = std::string(gpu::IntegralImageVariantName(r->variant));
  w.call->record.set_analysis(IntegralImageAnalysis::kName, st->variant);

  st->next_y = y0 + rows;
  bool done = st->next_y >= d.height;
  if (done && !plan.whole && st->options.squared && !st->squared_phase) {
    st->squared_phase = true;
    st->next_y = 0;
    done = false;
  }
  if (done) {
    v1::IntegralTrailer* t = messages.emplace_back().mutable_trailer();
    t->set_variant(st->variant);
    *t->mutable_timing() = w.call->record.Timing();
  }
  if (absl::Status s =
          w.call->Send(std::move(messages), std::move(lease), done ? nullptr : NextPart(w, st));
      !s.ok()) {
    return s;
  }
  if (done) w.call->Close(absl::OkStatus());
  return absl::OkStatus();
}

}  // namespace

IntegralPlan PlanIntegralParts(const gpu::ImageDesc& desc, bool squared, uint64_t part_bytes) {
  IntegralPlan plan;
  plan.row_bytes = uint64_t(desc.width) * uint64_t(desc.channels) * 8;
  plan.tables = squared ? 2 : 1;
  plan.whole = IntegralPartBytes(plan, desc.height, plan.tables) <= part_bytes;
  plan.rows_per_part = desc.height;
  if (!plan.whole) {
    // At least one row, whatever the budget: a part that cannot fit is refused by the worker.
    plan.rows_per_part = int(std::clamp<uint64_t>(
        part_bytes / (plan.row_bytes + kIntegralChunkOverhead), 1, uint64_t(desc.height)));
  }
  return plan;
}

uint64_t IntegralPartBytes(const IntegralPlan& plan, int rows, int tables) {
  return uint64_t(rows) * uint64_t(tables) * (plan.row_bytes + kIntegralChunkOverhead) +
         kStreamEndsBytes;
}

absl::StatusOr<gpu::IntegralImageOptions> IntegralImageAnalysis::MapOptions(
    const Request& request) {
  Options options;
  options.squared = request.options().squared();
  absl::StatusOr<gpu::IntegralImageVariant> variant = ParseVariant<gpu::IntegralImageVariant>(
      request.variant(), "the integral image", gpu::IntegralImageVariantName,
      gpu::ParseIntegralImageVariant);
  if (!variant.ok()) return variant.status();
  options.variant = *variant;
  return options;
}

absl::StatusOr<uint64_t> IntegralImageAnalysis::ResultBytes(const gpu::ImageDesc& desc,
                                                            const Options& options,
                                                            uint64_t part_bytes) {
  if (absl::Status s = gpu::ValidateIntegralImageOptions(options); !s.ok()) return s;
  const IntegralPlan plan = PlanIntegralParts(desc, options.squared, part_bytes);
  return plan.whole ? IntegralPartBytes(plan, desc.height, plan.tables)
                    : IntegralPartBytes(plan, plan.rows_per_part, 1);
}

absl::Status IntegralImageAnalysis::Run(const StreamWork<Response>& work, GpuEnv& env,
                                        const Acquired& image, const Options& options,
                                        Lease lease) {
  auto st = std::make_shared<PartState>();
  st->options = options;
  st->plan = PlanIntegralParts(work.input->desc, options.squared,
                               work.service->worker.results().part_bytes());
  return RunPart(work, env, image, std::move(st), std::move(lease));
}

std::vector<std::string> IntegralImageAnalysis::Variants(const gpu::DeviceInfo& device) {
  // Those that run on the device (8-bit images at least).
  return VariantsAvailable<gpu::IntegralImageVariant>(
      gpu::IntegralImageVariantName, gpu::ParseIntegralImageVariant,
      [&](gpu::IntegralImageVariant v) {
        return gpu::IntegralImageVariantAvailable(device, v, gpu::SampleType::kUint8);
      });
}

}  // namespace glimpse::server
