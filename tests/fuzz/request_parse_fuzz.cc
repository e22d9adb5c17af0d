// The service's parse of requests (ParseMessage, ParseLeavingImageData and WireFault,
// server/rpc/wire.cc), which runs on any bytes a client sends to any method: for every request
// type, the bytes are refused exactly where protobuf refuses them, however gRPC split them into
// slices, each refusal names its fault, and a request whose inline image is left where it arrived
// is, with those bytes put back, protobuf's parse. The input is the request's bytes, handed over
// in three slices.
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/support/byte_buffer.h>

#include <concepts>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "glimpse/v1/image_analytics.pb.h"
#include "server/rpc/wire.h"
#include "tests/fuzz/fuzz_check.h"

namespace glimpse::fuzz {
namespace {

// The ImageRef whose inline bytes ParseLeavingImageData leaves in place, in each request type that
// has one.
template <typename Request>
  requires requires(Request r) {
             { r.mutable_image() } -> std::same_as<v1::ImageRef*>;
           }
v1::ImageRef* RefOf(Request* m) {
  return m->mutable_image();
}
v1::ImageRef* RefOf(v1::AnalyzeRequest* m) { return m->mutable_header()->mutable_image(); }
v1::ImageRef* RefOf(v1::AnalyzeBatchRequest* m) { return m->mutable_image()->mutable_image(); }

template <typename Request>
void CheckParse(std::string_view bytes) {
  Request expected;
  const bool parses = expected.ParseFromArray(bytes.data(), int(bytes.size()));
  const std::string fault = server::WireFault(bytes, *Request::descriptor());
  Check(parses == fault.empty(), std::string(Request::descriptor()->name()) +
                                     (parses ? " parses, yet a fault was found: " + fault
                                             : " is refused by protobuf, yet no fault was found"));
  // Three slices where the bytes allow: gRPC hands a message over in as many as it arrived in.
  const size_t a = bytes.size() / 3, b = 2 * bytes.size() / 3;
  std::vector<grpc::Slice> slices;
  for (auto [from, to] : {std::pair{size_t(0), a}, std::pair{a, b}, std::pair{b, bytes.size()}}) {
    slices.emplace_back(bytes.data() + from, to - from);
  }
  grpc::ByteBuffer wire(slices.data(), slices.size());
  Request parsed;
  const absl::Status s = server::ParseMessage(wire, "the request", &parsed);
  Check(s.ok() == parses, "ParseMessage disagrees with protobuf: " + s.ToString());
  CheckRefusal(s);
  if (parses) {
    Check(parsed.SerializeAsString() == expected.SerializeAsString(), "a different message");
  } else {
    Check(std::string(s.message()).ends_with(fault), "the refusal does not name the fault");
  }
  if constexpr (requires(Request r) { RefOf(&r); }) {
    Request left;
    server::WireBytes data;
    const absl::Status l = server::ParseLeavingImageData(wire, "the request", &left, &data);
    Check(l.ok() == parses, "ParseLeavingImageData disagrees with protobuf: " + l.ToString());
    if (!parses) {
      Check(l.message() == s.message(), "ParseLeavingImageData refuses otherwise");
      return;
    }
    if (data.size() > 0) {
      std::string bytes_back(data.size(), '\0');
      data.CopyTo(0, data.size(), reinterpret_cast<uint8_t*>(bytes_back.data()));
      v1::ImageRef* ref = RefOf(&left);
      Check(ref->has_encoded() ? ref->encoded().data().empty() : ref->raw().data().empty(),
            "the inline bytes are both left in place and in the message");
      if (ref->has_encoded()) {
        ref->mutable_encoded()->set_data(std::move(bytes_back));
      } else {
        ref->mutable_raw()->set_data(std::move(bytes_back));
      }
    }
    Check(left.SerializeAsString() == expected.SerializeAsString(),
          "with its inline bytes put back, a different message");
  }
}

}  // namespace
}  // namespace glimpse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace glimpse;
  static const google::protobuf::LogSilencer* quiet = new google::protobuf::LogSilencer;
  (void)quiet;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  fuzz::CheckParse<v1::HistogramRequest>(bytes);
  fuzz::CheckParse<v1::IntegralImageRequest>(bytes);
  fuzz::CheckParse<v1::CompactRequest>(bytes);
  fuzz::CheckParse<v1::BoxFilterRequest>(bytes);
  fuzz::CheckParse<v1::GetImageInfoRequest>(bytes);
  fuzz::CheckParse<v1::UploadImageRequest>(bytes);
  fuzz::CheckParse<v1::AnalyzeRequest>(bytes);
  fuzz::CheckParse<v1::AnalyzeBatchRequest>(bytes);
  return 0;
}
