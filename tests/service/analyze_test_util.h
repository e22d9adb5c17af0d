// Helpers for Analyze calls in the service tests: one call, its messages, and each analysis's
// result in a comparable form.
#ifndef GLIMPSE_TESTS_SERVICE_ANALYZE_TEST_UTIL_H_
#define GLIMPSE_TESTS_SERVICE_ANALYZE_TEST_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "glimpse/v1/image_analytics.grpc.pb.h"

namespace glimpse::testing {

struct AnalyzeCallResult {
  grpc::Status status;
  std::vector<v1::AnalyzeResponse> messages;
};

// One Analyze call: `header` first, then `upload` in chunks of `chunk` bytes.
inline AnalyzeCallResult CallAnalyze(v1::ImageAnalytics::Stub& stub,
                                     const v1::AnalyzeHeader& header,
                                     const std::string& upload = "", size_t chunk = 64 << 10) {
  AnalyzeCallResult out;
  grpc::ClientContext ctx;
  auto stream = stub.Analyze(&ctx);
  v1::AnalyzeRequest first;
  *first.mutable_header() = header;
  size_t off = std::min(chunk, upload.size());
  first.set_chunk(upload.substr(0, off));
  bool ok = stream->Write(first);
  while (ok && off < upload.size()) {
    v1::AnalyzeRequest m;
    m.set_chunk(upload.substr(off, chunk));
    off += chunk;
    ok = stream->Write(m);
  }
  stream->WritesDone();
  v1::AnalyzeResponse r;
  while (stream->Read(&r)) out.messages.push_back(r);
  out.status = stream->Finish();
  return out;
}

// The parts of analysis `index`, serialized and concatenated, with what differs between equal
// results (timing, the image's id and times) cleared.
inline std::string ComparableResult(const std::vector<v1::AnalyzeResponse>& messages,
                                    uint32_t index) {
  std::string out;
  for (v1::AnalyzeResponse m : messages) {
    if (m.index() != index || m.has_timing() || m.has_kept()) continue;
    auto clear_image = [](v1::ImageInfo* i) {
      i->clear_image_id();
      i->clear_created_unix_ms();
      i->clear_last_used_unix_ms();
      i->clear_expires_unix_ms();
      i->clear_origin();
      i->clear_label();
    };
    if (m.has_histogram()) {
      m.mutable_histogram()->clear_timing();
      clear_image(m.mutable_histogram()->mutable_image());
    } else if (m.has_integral_image()) {
      v1::IntegralImageResponse* p = m.mutable_integral_image();
      if (p->has_trailer()) p->mutable_trailer()->clear_timing();
      if (p->has_header()) clear_image(p->mutable_header()->mutable_image());
    } else if (m.has_compaction()) {
      v1::CompactResponse* p = m.mutable_compaction();
      if (p->has_timing()) p->clear_timing();
      if (p->has_header()) clear_image(p->mutable_header()->mutable_image());
    } else if (m.has_box_filter()) {
      v1::BoxFilterResponse* p = m.mutable_box_filter();
      if (p->has_timing()) p->clear_timing();
      if (p->has_header()) {
        clear_image(p->mutable_header()->mutable_image());
        clear_image(p->mutable_header()->mutable_result());
      }
    }
    out += m.SerializeAsString();
  }
  return out;
}

// Every analysis with options that make each produce a non-trivial result on 8-bit images.
inline void AddEveryAnalysis(v1::AnalyzeHeader* header) {
  v1::HistogramRequest* h = header->add_analyses()->mutable_histogram();
  h->mutable_options()->set_bins(64);
  h->mutable_options()->set_source(v1::HISTOGRAM_SOURCE_ALL_CHANNELS);
  header->add_analyses()->mutable_integral_image()->mutable_options()->set_squared(true);
  v1::CompactRequest* c = header->add_analyses()->mutable_compaction();
  c->mutable_options()->set_lo(100);
  c->mutable_options()->set_hi(180);
  v1::BoxFilterRequest* b = header->add_analyses()->mutable_box_filter();
  b->mutable_options()->set_rx(2);
  b->mutable_options()->set_ry(3);
  b->set_encoding(v1::PIXEL_ENCODING_RAW);
}

}  // namespace glimpse::testing

#endif  // GLIMPSE_TESTS_SERVICE_ANALYZE_TEST_UTIL_H_
