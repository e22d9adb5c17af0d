// Messages on the wire: responses encoded without copying their large bytes fields, and requests
// parsed by the service itself, so that one that does not parse is refused with what is wrong.
//
// gRPC serializes a protobuf response into fresh memory: every byte of a summed-area table or of
// filtered pixels is copied once more on its way to the socket. EncodeAliasing writes the
// message's small fields as usual and hands each large bytes field (an integral table's rows, a
// filtered image's pixels, a compaction's pixel list), wherever it is nested, to gRPC as a slice
// of the string that already holds it; the string lives until gRPC drops the slice. The bytes on
// the wire are a valid encoding of the same message (a large field comes after its siblings
// instead of in field-number order, which every protobuf parser accepts).
//
//   v1::IntegralImageResponse part = ...;  // a chunk of 1 MiB
//   // The message moves (nothing copied) into the buffer's keeping:
//   grpc::ByteBuffer wire =
//       EncodeAliasing(std::make_unique<v1::IntegralImageResponse>(std::move(part)));
//   writer->StartWrite(&wire);  // a method registered with a ByteBuffer response
#ifndef GLIMPSE_SERVER_RPC_WIRE_H_
#define GLIMPSE_SERVER_RPC_WIRE_H_

#include <google/protobuf/message.h>
#include <grpcpp/support/byte_buffer.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace glimpse::server {

// Below this a bytes field is copied: a copy of 16 KiB costs about what a slice's bookkeeping
// does.
inline constexpr size_t kMinAliasBytes = size_t{16} << 10;

// The encoding of `message`, which the buffer keeps until gRPC has sent it: its singular bytes
// fields of at least `min_alias_bytes`, at any depth of singular message fields, are slices of
// their own strings. (A generated message's move constructor moves its fields without copying
// them, so a message can be handed over as std::make_unique<T>(std::move(m)).)
grpc::ByteBuffer EncodeAliasing(std::unique_ptr<google::protobuf::Message> message,
                                size_t min_alias_bytes = kMinAliasBytes);

// Requests are registered as raw bytes too (server/service.cc): gRPC 1.51's callback API answers
// a unary or server-streaming request that does not parse with UNIMPLEMENTED and no message, and
// ends a stream of requests at one as if the client had stopped sending (a batch would end early
// with OK). The service parses them instead:
//
//   v1::HistogramRequest request;
//   if (absl::Status s = ParseMessage(bytes, "the request", &request); !s.ok()) return Refuse(s);
//
// INVALID_ARGUMENT where `bytes` do not parse as `*message`: "<what> is not a glimpse.v1.X: " and
// the first fault WireFault finds.
absl::Status ParseMessage(const grpc::ByteBuffer& bytes, std::string_view what,
                          google::protobuf::Message* message);

// Bytes of a received message left where they arrived: slices of gRPC's buffer, held here.
class WireBytes {
 public:
  size_t size() const { return size_; }
  // Copies bytes [at, at + n) to `dst`.
  void CopyTo(size_t at, size_t n, uint8_t* dst) const;
  // Bytes [at, at + n) in place where they lie in one slice, else copied to `scratch` (n bytes).
  const uint8_t* Read(size_t at, size_t n, uint8_t* scratch) const;
  // All of them as one span: in place where they lie in one slice, else copied once into memory
  // this keeps.
  std::span<const uint8_t> Contiguous();
  size_t slices() const { return slices_.size(); }

 private:
  friend class WireReader;
  std::vector<grpc::Slice> slices_;
  std::vector<size_t> starts_;  // each slice's offset
  size_t size_ = 0;
  std::vector<uint8_t> joined_;
};

// ParseMessage for a request with an inline image (an ImageRef at `image`, as the single-call
// analyses have it, at `header.image` in Analyze's first message, at `image.image` in an
// AnalyzeBatch image), except that the bytes of the image (its encoded.data or raw.data) stay
// where they arrived: `*data` holds them and that field of `*message` is empty. A decoder or the
// upload then reads them once, from gRPC's own buffer, rather than after protobuf has copied them
// into the message. Requests in any other layout (no inline image, a field repeated that
// protobuf would merge, a oneof sibling of a field on the way to the image, a group) are parsed by
// ParseMessage, whole, `*data` left empty. Either way `*message` with the bytes put back is
// protobuf's parse.
absl::Status ParseLeavingImageData(const grpc::ByteBuffer& bytes, std::string_view what,
                                   google::protobuf::Message* message, WireBytes* data);

// The first reason the protobuf encoding `bytes` does not parse as a `type`: a string field that
// is not UTF-8 (its path, the byte and where), a tag, length or value cut off by the end of its
// message, a wire type that does not exist, a group never closed, or nesting deeper than
// protobuf's limit of 100. Empty where it finds none (protobuf parses what this accepts, except in
// ways it does not check: a packed field's malformed values).
std::string WireFault(std::string_view bytes, const google::protobuf::Descriptor& type);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_RPC_WIRE_H_
