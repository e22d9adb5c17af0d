// The calls `glimpse load` makes (client/load_calls.h).
#include "client/load_calls.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "client/analyses.h"

namespace glimpse::client {
namespace {

v1::Timing Sum(const v1::Timing& a, const v1::Timing& b) {
  v1::Timing t;
  t.set_gpu_ns(a.gpu_ns() + b.gpu_ns());
  t.set_queue_ns(a.queue_ns() + b.queue_ns());
  return t;
}

// The four analyses as `Call` runs them, for one Analyze call.
void AddFourAnalyses(v1::AnalyzeHeader* h) {
  for (const char* each : {"histogram", "integral_image", "compaction", "box_filter"}) {
    *h->add_analyses() = LoadAnalysis(each);
  }
}

// Reads a streamed answer to its end, keeping the Timing that timing_of(message) points to (null
// for messages without one); returns the call's status.
template <typename Response, typename TimingOf>
grpc::Status ReadAll(grpc::ClientReader<Response>& reader, v1::Timing* timing, TimingOf timing_of) {
  Response m;
  while (reader.Read(&m)) {
    if (const v1::Timing* t = timing_of(m)) *timing = *t;
  }
  return reader.Finish();
}

// The Timing part of the streamed answers that carry it as a message of their own.
template <typename Response>
const v1::Timing* TimingPart(const Response& m) {
  return m.has_timing() ? &m.timing() : nullptr;
}

}  // namespace

void Settle(Outcome* out) {
  out->ok = out->status.ok();
  out->images = out->ok ? 1 : 0;
  out->errors = out->ok ? 0 : 1;
  if (!out->ok) out->error = out->status.error_message();
}

v1::Analysis LoadAnalysis(const std::string& rpc) {
  v1::Analysis a;
  if (rpc == "histogram") {
    a.mutable_histogram();
  } else if (rpc == "integral_image") {
    a.mutable_integral_image();
  } else if (rpc == "compaction") {
    a.mutable_compaction()->mutable_options()->set_lo(250);
    a.mutable_compaction()->mutable_options()->set_hi(255);
  } else if (rpc == "box_filter") {
    v1::BoxFilterRequest* b = a.mutable_box_filter();
    b->mutable_options()->set_rx(3);
    b->mutable_options()->set_ry(3);
    b->set_encoding(v1::PIXEL_ENCODING_RAW);
  } else {
    Die(kExitUsage,
        fmt::format(
            "--rpcs: unknown analysis \"{}\" (histogram, integral_image, compaction, box_filter)",
            rpc));
  }
  return a;
}

Outcome Call(const Connection& c, const std::string& rpc, const std::string& id) {
  grpc::ClientContext context;
  c.Prepare(&context);
  Outcome out;
  v1::ImageRef ref;
  ref.set_image_id(id);
  const v1::Analysis a = LoadAnalysis(rpc);
  if (a.has_histogram()) {
    v1::HistogramRequest request = a.histogram();
    *request.mutable_image() = ref;
    v1::HistogramResponse response;
    out.status = c.stub->Histogram(&context, request, &response);
    out.timing = response.timing();
  } else if (a.has_integral_image()) {
    v1::IntegralImageRequest request = a.integral_image();
    *request.mutable_image() = ref;
    out.status = ReadAll(*c.stub->IntegralImage(&context, request), &out.timing,
                         [](const v1::IntegralImageResponse& m) {
                           return m.has_trailer() ? &m.trailer().timing() : nullptr;
                         });
  } else if (a.has_compaction()) {
    v1::CompactRequest request = a.compaction();
    *request.mutable_image() = ref;
    out.status =
        ReadAll(*c.stub->Compact(&context, request), &out.timing, TimingPart<v1::CompactResponse>);
  } else {
    v1::BoxFilterRequest request = a.box_filter();
    *request.mutable_image() = ref;
    out.status = ReadAll(*c.stub->BoxFilter(&context, request), &out.timing,
                         TimingPart<v1::BoxFilterResponse>);
  }
  Settle(&out);
  return out;
}

Outcome Batch(const Connection& c, const google::protobuf::RepeatedPtrField<v1::Analysis>& analyses,
              int n, const std::string& id) {
  Outcome out;
  out.status = RunBatch(
      c, analyses, false, size_t(n),
      [&](size_t, v1::BatchImage* m) { m->mutable_image()->set_image_id(id); },
      [&](const v1::AnalyzeBatchResponse& m) {
        if (m.has_summary()) out.timing = m.summary().timing();
        if (!m.has_end()) return;
        if (!m.end().has_error()) {
          ++out.images;
        } else if (out.error.empty()) {
          out.error =
              fmt::format("image {}: {} {}", m.index(), StatusCodeName(m.end().error().code()),
                          m.end().error().message());
        }
      });
  out.ok = out.status.ok();
  // Every image not answered without error counts, also those a failed call left unanswered.
  out.errors = n - out.images;
  if (!out.ok && out.error.empty()) out.error = out.status.error_message();
  return out;
}

Outcome Combined(const Connection& c, const std::string& rpc, const std::string& pixels,
                 const v1::UploadHeader& header) {
  Outcome out;
  if (rpc == "upload_and_4") {
    v1::UploadImageResponse uploaded;
    out.status = UploadBytes(c, pixels, header, &uploaded, false);
    if (!out.status.ok()) {
      Settle(&out);
      return out;
    }
    const std::string id = uploaded.image().image_id();
    for (const char* each : {"histogram", "integral_image", "compaction", "box_filter"}) {
      Outcome r = Call(c, each, id);
      out.timing = Sum(out.timing, r.timing);
      if (!r.ok) {
        out.status = r.status;
        break;
      }
    }
    DeleteImageQuietly(c, id);
    Settle(&out);
    return out;
  }
  grpc::ClientContext context;
  c.Prepare(&context);
  auto stream = c.stub->Analyze(&context);
  v1::AnalyzeRequest first;
  *first.mutable_header()->mutable_upload() = header;
  AddFourAnalyses(first.mutable_header());
  Progress quiet("upload", 0);
  WriteChunked(*stream, std::move(first), pixels, quiet);
  v1::AnalyzeResponse m;
  while (stream->Read(&m)) {
    if (m.has_timing()) out.timing = m.timing();
  }
  out.status = stream->Finish();
  Settle(&out);
  return out;
}

bool IsCombined(const std::string& rpc) { return rpc == "upload_and_4" || rpc == "analyze_4"; }

std::string MakeImage(int width, int height) {
  std::string pixels(size_t(width) * height * 4, '\0');
  uint32_t state = 2463534242u;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      state ^= state << 13;
      state ^= state >> 17;
      state ^= state << 5;
      char* p = &pixels[(size_t(y) * width + x) * 4];
      p[0] = char((x * 255 / std::max(1, width - 1) + (state & 15)) & 255);
      p[1] = char((y * 255 / std::max(1, height - 1) + ((state >> 4) & 15)) & 255);
      p[2] = char((state >> 8) & 255);
      p[3] = char(255);
    }
  }
  return pixels;
}

}  // namespace glimpse::client
