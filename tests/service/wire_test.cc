// Messages on the wire (server/rpc/wire.h). Responses encoded without copying their large bytes
// fields: random messages of every streamed response type parse back equal to what was encoded,
// the buffer is as long as the message's own encoding, and every large field reaches the buffer
// as a slice of the very string that held it, nothing else large being copied. Requests parsed by
// the service: equal to protobuf's parse however gRPC split their bytes, refused exactly where
// protobuf refuses them, and each refusal naming its fault.
#include "server/rpc/wire.h"

#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "glimpse/v1/image_analytics.pb.h"
#include "tests/gpu_test_env.h"

namespace glimpse::testing {
namespace {

using server::EncodeAliasing;
using server::kMinAliasBytes;
using server::ParseLeavingImageData;
using server::ParseMessage;
using server::WireBytes;
using server::WireFault;

class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  uint64_t Below(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }
  // Sizes on both sides of `min`, and some far above it.
  std::string Bytes(size_t min) {
    const size_t sizes[] = {
        0, 1, min - 1, min, min + 1, size_t(Below(4 * min + 1)), size_t(Below(300000))};
    std::string s(sizes[Below(std::size(sizes))], '\0');
    Fill(s);
    return s;
  }
  void Fill(std::string& s) {
    FillRandomBytes(reinterpret_cast<uint8_t*>(s.data()), s.size(), rng_);
  }
  uint32_t U32() { return uint32_t(rng_()); }

 private:
  std::mt19937_64 rng_;
};

v1::IntegralImageResponse RandomIntegral(Random& r, size_t min) {
  v1::IntegralImageResponse m;
  switch (r.Below(3)) {
    case 0:
      m.mutable_header()->set_width(r.U32());
      m.mutable_header()->set_table_bytes(r.U32());
      break;
    case 1:
      m.mutable_chunk()->set_squared(r.Below(2) == 1);
      m.mutable_chunk()->set_y0(r.U32());
      m.mutable_chunk()->set_rows(r.U32());
      *m.mutable_chunk()->mutable_data() = r.Bytes(min);
      break;
    default:
      m.mutable_trailer()->set_variant("strips");
      m.mutable_trailer()->mutable_timing()->set_gpu_ns(r.U32());
  }
  return m;
}

v1::CompactResponse RandomCompact(Random& r, size_t min) {
  v1::CompactResponse m;
  if (r.Below(4) == 0) {
    m.mutable_header()->set_total(r.U32());
    return m;
  }
  m.mutable_chunk()->set_first(r.U32());
  *m.mutable_chunk()->mutable_xy() = r.Bytes(min);  // two large fields side by side, or one
  *m.mutable_chunk()->mutable_values() = r.Bytes(min);
  return m;
}

v1::BoxFilterResponse RandomBox(Random& r, size_t min) {
  v1::BoxFilterResponse m;
  if (r.Below(4) == 0) {
    m.mutable_header()->set_data_bytes(r.U32());
    m.mutable_header()->set_variant("sep");
    return m;
  }
  *m.mutable_chunk() = r.Bytes(min);  // a bytes member of a oneof
  return m;
}

v1::AnalyzeResponse RandomAnalyze(Random& r, size_t min) {
  v1::AnalyzeResponse m;
  m.set_index(uint32_t(r.Below(64)));
  switch (r.Below(5)) {
    case 0:
      *m.mutable_integral_image() = RandomIntegral(r, min);
      break;
    case 1:
      *m.mutable_compaction() = RandomCompact(r, min);
      break;
    case 2:
      *m.mutable_box_filter() = RandomBox(r, min);
      break;
    case 3:
      m.mutable_histogram()->add_histograms()->add_counts(r.U32());
      break;
    default:
      m.mutable_timing()->set_server_ns(r.U32());
  }
  return m;
}

v1::AnalyzeBatchResponse RandomBatch(Random& r, size_t min) {
  v1::AnalyzeBatchResponse m;
  m.set_index(r.U32());
  m.set_key("image-" + std::to_string(r.Below(1000)));
  if (r.Below(4) == 0) {
    m.mutable_end()->mutable_timing()->set_gpu_ns(r.U32());
  } else {
    *m.mutable_result() = RandomAnalyze(r, min);
  }
  return m;
}

// Every bytes field of `m` of at least `min` bytes, at any depth: where its bytes are, and how
// many.
void LargeFields(const google::protobuf::Message& m, size_t min,
                 std::vector<std::pair<const char*, size_t>>* out) {
  const google::protobuf::Reflection* r = m.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  std::string scratch;
  for (const auto* f : fields) {
    if (f->is_repeated()) continue;  // none of the responses repeats a large field
    if (f->type() == google::protobuf::FieldDescriptor::TYPE_BYTES) {
      const std::string& s = r->GetStringReference(m, f, &scratch);
      if (s.size() >= min) out->push_back({s.data(), s.size()});
    } else if (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) {
      LargeFields(r->GetMessage(m, f), min, out);
    }
  }
}

// Encodes `m` and checks the buffer against it. Returns the number of slices that alias.
template <typename M>
int EncodeAndCheck(M m, size_t min) {
  const M expected = m;
  std::vector<std::pair<const char*, size_t>> large;
  LargeFields(m, min, &large);
  // Moved in: the generated move constructor must move the strings, not copy them.
  grpc::ByteBuffer wire = EncodeAliasing(std::make_unique<M>(std::move(m)), min);
  EXPECT_EQ(wire.Length(), expected.ByteSizeLong()) << expected.ShortDebugString().substr(0, 300);

  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(wire.Dump(&slices).ok());
  int aliased = 0;
  for (const grpc::Slice& s : slices) {
    const auto* begin = reinterpret_cast<const char*>(s.begin());
    bool is_large_field = false;
    for (const auto& [data, size] : large) {
      if (begin == data && s.size() == size) is_large_field = true;
    }
    if (is_large_field) {
      ++aliased;
    } else {
      // Whatever was copied is small: framing and fields under `min` (a compaction chunk's two
      // lists may both be just under it).
      EXPECT_LT(s.size(), 2 * min + 64) << "a large slice that is not a field's own string";
    }
  }
  EXPECT_EQ(aliased, int(large.size())) << "every large field goes out as its own string";

  M parsed;
  grpc::ProtoBufferReader reader(&wire);
  EXPECT_TRUE(parsed.ParseFromZeroCopyStream(&reader));
  std::string diff;
  google::protobuf::util::MessageDifferencer d;
  d.ReportDifferencesToString(&diff);
  EXPECT_TRUE(d.Compare(expected, parsed)) << diff.substr(0, 500);
  return aliased;
}

TEST(WireTest, RandomResponsesParseBackEqualWithLargeFieldsAliased) {
  GLIMPSE_SEED_TRACE();
  Random r(TestSeed());
  int aliased = 0;
  for (int i = 0; i < 1000; ++i) {
    // The service's threshold, and small ones that alias nearly everything.
    const size_t mins[] = {kMinAliasBytes, 1, 2, 100};
    const size_t min = mins[r.Below(std::size(mins))];
    SCOPED_TRACE(::testing::Message() << "message " << i << ", min " << min);
    switch (i % 5) {
      case 0:
        aliased += EncodeAndCheck(RandomIntegral(r, min), min);
        break;
      case 1:
        aliased += EncodeAndCheck(RandomCompact(r, min), min);
        break;
      case 2:
        aliased += EncodeAndCheck(RandomBox(r, min), min);
        break;
      case 3:
        aliased += EncodeAndCheck(RandomAnalyze(r, min), min);
        break;
      default:
        aliased += EncodeAndCheck(RandomBatch(r, min), min);
    }
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(aliased, 50) << "the random messages hardly held a large field";
}

TEST(WireTest, ABytesMemberOfAOneofIsAliasedAtAnyDepth) {
  // A filtered image's pixels: BoxFilterResponse.chunk, alone and as an Analyze part of a batch.
  v1::BoxFilterResponse box;
  box.set_chunk(std::string(kMinAliasBytes, 'p'));
  EXPECT_EQ(EncodeAndCheck(box, kMinAliasBytes), 1);
  v1::AnalyzeBatchResponse batch;
  batch.set_index(9);
  batch.set_key("k");
  batch.mutable_result()->set_index(2);
  *batch.mutable_result()->mutable_box_filter() = box;
  EXPECT_EQ(EncodeAndCheck(batch, kMinAliasBytes), 1);
}

TEST(WireTest, MessagesWithoutLargeFieldsAreEncodedWhole) {
  v1::IntegralImageResponse m;
  m.mutable_chunk()->set_y0(5);
  m.mutable_chunk()->set_data(std::string(kMinAliasBytes - 1, 'd'));
  const std::string expected = m.SerializeAsString();
  grpc::ByteBuffer wire = EncodeAliasing(std::make_unique<v1::IntegralImageResponse>(m));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(wire.Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(slices[0].begin()), slices[0].size()),
            expected);

  EXPECT_EQ(EncodeAliasing(std::make_unique<v1::AnalyzeResponse>()).Length(), 0u);
}

// ---- requests ---------------------------------------------------------------------------------

// Random requests of the types the service parses, some with strings that are not UTF-8 (C++'s
// protobuf serializes those, with a logged error; its parser refuses them).
std::string RandomText(Random& r) {
  std::string s(r.Below(6), 'a');
  for (char& c : s) c = char(r.Below(4) == 0 ? 0x80 + r.Below(128) : 'a' + r.Below(26));
  return s;
}

v1::ImageRef RandomRef(Random& r) {
  v1::ImageRef ref;
  switch (r.Below(3)) {
    case 0:
      ref.set_image_id(RandomText(r));
      break;
    case 1:
      ref.mutable_encoded()->set_data(r.Bytes(64));
      ref.mutable_encoded()->set_desired_channels(uint32_t(r.Below(5)));
      break;
    default:
      ref.mutable_raw()->mutable_layout()->set_width(r.U32());
      ref.mutable_raw()->mutable_layout()->set_channels(3);
      ref.mutable_raw()->set_data(r.Bytes(64));
  }
  return ref;
}

v1::AnalyzeBatchRequest RandomBatchRequest(Random& r) {
  v1::AnalyzeBatchRequest m;
  if (r.Below(2) == 0) {
    v1::Analysis* a = m.mutable_header()->add_analyses();
    *a->mutable_histogram()->mutable_image() = RandomRef(r);
    a->mutable_histogram()->set_variant(RandomText(r));
    m.mutable_header()->add_analyses()->mutable_box_filter()->set_label(RandomText(r));
    m.mutable_header()->set_max_in_flight(r.U32());
  } else {
    m.mutable_image()->set_key(RandomText(r));
    *m.mutable_image()->mutable_image() = RandomRef(r);
  }
  return m;
}

// `bytes` as gRPC may hand them over: in `parts` slices.
grpc::ByteBuffer Split(const std::string& bytes, Random& r, size_t parts) {
  std::vector<size_t> cuts = {0, bytes.size()};
  for (size_t i = 1; i < parts; ++i) cuts.push_back(size_t(r.Below(bytes.size() + 1)));
  std::sort(cuts.begin(), cuts.end());
  std::vector<grpc::Slice> slices;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    slices.emplace_back(bytes.data() + cuts[i], cuts[i + 1] - cuts[i]);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Variant `kind` of a request's bytes: 0 as sent, 1 cut short, 2 with bytes changed, 3 followed
// by themselves (every field repeated, which protobuf merges).
std::string Variant(std::string bytes, int kind, Random& r) {
  switch (kind) {
    case 0:
      break;
    case 1:
      bytes.resize(size_t(r.Below(bytes.size() + 1)));
      break;
    case 2:
      for (uint64_t k = 1 + r.Below(3); k > 0 && !bytes.empty(); --k) {
        bytes[size_t(r.Below(bytes.size()))] = char(r.Below(256));
      }
      break;
    default:
      bytes += bytes;
  }
  return bytes;
}

// Parses `bytes` both ways and checks they agree: the service's parse where protobuf's succeeds
// (the same message), a refusal naming the type and a fault where it fails.
void ExpectParsedAsProtobufDoes(const std::string& bytes, Random& r) {
  v1::AnalyzeBatchRequest expected;
  const bool parses = expected.ParseFromString(bytes);
  v1::AnalyzeBatchRequest parsed;
  const absl::Status s = ParseMessage(Split(bytes, r, 1 + r.Below(4)), "message 2", &parsed);
  const std::string fault = WireFault(bytes, *v1::AnalyzeBatchRequest::descriptor());
  ASSERT_EQ(s.ok(), parses) << s;
  if (parses) {
    EXPECT_EQ(fault, "");
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, expected));
    return;
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(fault, "") << "protobuf refuses these bytes, but no fault was found";
  EXPECT_EQ(std::string(s.message()),
            "message 2 is not a glimpse.v1.AnalyzeBatchRequest: " + fault);
}

TEST(WireTest, RequestsAreRefusedExactlyWhereProtobufRefusesThem) {
  GLIMPSE_SEED_TRACE();
  Random r(TestSeed());
  google::protobuf::LogSilencer quiet;  // serializing text that is not UTF-8 logs an error
  int refused = 0;
  for (int i = 0; i < 3000 && !::testing::Test::HasFailure(); ++i) {
    SCOPED_TRACE(::testing::Message() << "request " << i);
    const std::string bytes = Variant(RandomBatchRequest(r).SerializeAsString(), i % 3, r);
    v1::AnalyzeBatchRequest check;
    refused += check.ParseFromString(bytes) ? 0 : 1;
    ExpectParsedAsProtobufDoes(bytes, r);
  }
  EXPECT_GT(refused, 300) << "the random requests were hardly ever malformed";
}

TEST(WireTest, EachFaultOfARequestIsNamed) {
  google::protobuf::LogSilencer quiet;  // protobuf logs each string that is not UTF-8
  const auto fault = [](std::string_view bytes, const google::protobuf::Descriptor& type) {
    return WireFault(bytes, type);
  };
  const auto& histogram = *v1::HistogramRequest::descriptor();
  const auto& batch = *v1::AnalyzeBatchRequest::descriptor();
  using namespace std::string_literals;
  // image { image_id: "a\xC3(" }: a lead byte without its continuation.
  EXPECT_EQ(fault("\x0a\x05\x0a\x03"
                  "a\xC3("s,
                  histogram),
            "image.image_id is not UTF-8: byte 1 of its 3 is 0xc3 (a string field holds UTF-8 "
            "text; bytes in another encoding must be converted)");
  // An overlong '/', a surrogate, and past U+10FFFF are refused as protobuf refuses them.
  for (const std::string& bad : {"\xC0\xAF"s, "\xED\xA0\x80"s, "\xF4\x90\x80\x80"s}) {
    EXPECT_NE(fault("\x1a"s + char(bad.size()) + bad, histogram), "") << bad.size();
    v1::HistogramRequest m;
    EXPECT_FALSE(m.ParseFromString("\x1a"s + char(bad.size()) + bad));
  }
  // header { analyses [ {}, { box_filter { label: "\xFF" } } ] }
  EXPECT_EQ(fault("\x0a\x09\x0a\x00\x0a\x05\x22\x03\x32\x01\xFF"s, batch),
            "header.analyses[1].box_filter.label is not UTF-8: byte 0 of its 1 is 0xff (a "
            "string field holds UTF-8 text; bytes in another encoding must be converted)");
  EXPECT_EQ(fault("\x0a\x09\x0a"s, histogram),
            "image at byte 0 declares 9 bytes where 1 remain in the message");
  EXPECT_EQ(fault("\x0a\x02\x20\x80"s, histogram),
            "image.field 4: its varint at byte 2 runs past the end of image");
  EXPECT_EQ(fault("\x80"s, histogram), "the tag at byte 0 runs past the end of the message");
  // Tags and lengths as protobuf reads them: a tag of at most 5 bytes taken mod 2^32 (this one is
  // field 5, varint), a length of at most 5 bytes and under 2^31.
  EXPECT_EQ(fault("\xa8\x80\x80\x80\x70\x01"s, histogram), "");
  EXPECT_TRUE(v1::HistogramRequest().ParseFromString("\xa8\x80\x80\x80\x70\x01"s));
  EXPECT_EQ(fault("\xa8\x80\x80\x80\x80\x00\x01"s, histogram),
            "the tag at byte 0 is longer than protobuf's 5 bytes");
  EXPECT_EQ(fault("\x2a\x80\x80\x80\x80\x00"s, histogram), "");  // 5 bytes: 0
  EXPECT_EQ(fault("\x2a\x80\x80\x80\x80\x80\x00"s, histogram),
            "field 5: its length at byte 1 is longer than protobuf's 5 bytes");
  EXPECT_FALSE(v1::HistogramRequest().ParseFromString("\x2a\x80\x80\x80\x80\x80\x00"s));
  EXPECT_FALSE(v1::HistogramRequest().ParseFromString("\xa8\x80\x80\x80\x80\x00\x01"s));
  EXPECT_EQ(fault("\x2a\xff\xff\xff\xff\x07"s, histogram),
            "field 5: its length at byte 1 is 2147483647, past protobuf's limit of 2147483631");
  EXPECT_EQ(fault("\x00"s, histogram), "the tag at byte 0 has field number 0 (they start at 1)");
  EXPECT_EQ(fault("\x29\x01\x02"s, histogram),
            "field 5: its 8-byte value at byte 0 runs past the end of the message");
  EXPECT_EQ(fault("\x2e"s, histogram),
            "field 5: wire type 6 at byte 0 does not exist (protobuf's are 0 to 5)");
  EXPECT_EQ(fault("\x2c"s, histogram), "the end-group tag at byte 0 (field 5) closes no group");
  EXPECT_EQ(fault("\x2b\x08\x01"s, histogram),
            "field 5: its group is never closed in the bytes that follow");
  // A closed group of unknown fields, and unknown fields of every wire type, parse.
  EXPECT_EQ(fault("\x2b\x08\x01\x12\x01\xFF\x2c\x30\x01\x39"s + std::string(8, 'x') +
                      "\x45"
                      "abcd",
                  histogram),
            "");
  std::string deep;
  for (int i = 0; i < 101; ++i) deep = "\x2b" + deep + "\x2c";
  EXPECT_EQ(fault(deep, histogram).substr(0, 40), "field 5.field 5.field 5.field 5.field 5.");
  EXPECT_NE(fault(deep, histogram).find("nested deeper than protobuf's limit of 100"),
            std::string::npos);
  v1::HistogramRequest m;
  EXPECT_FALSE(m.ParseFromString(deep));
  EXPECT_EQ(fault(deep.substr(1, deep.size() - 2), histogram), "");
  EXPECT_TRUE(m.ParseFromString(deep.substr(1, deep.size() - 2)));
}

TEST(WireTest, ALargeRequestParsesFromManySlices) {
  GLIMPSE_SEED_TRACE();
  Random r(TestSeed());
  v1::HistogramRequest m;
  std::string pixels(size_t(3) << 20, '\0');
  r.Fill(pixels);
  m.mutable_image()->mutable_raw()->set_data(pixels);
  m.mutable_image()->mutable_raw()->mutable_layout()->set_width(1024);
  m.set_variant("auto");
  const std::string bytes = m.SerializeAsString();
  v1::HistogramRequest parsed;
  ASSERT_TRUE(ParseMessage(Split(bytes, r, 200), "the request", &parsed).ok());
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(parsed, m));
}

// `m` with the bytes left in `data` put back into its inline image's field.
// The ImageRef of each request type whose inline image the service leaves in place.
v1::ImageRef* RefOf(v1::HistogramRequest* m) { return m->mutable_image(); }
v1::ImageRef* RefOf(v1::AnalyzeRequest* m) { return m->mutable_header()->mutable_image(); }
v1::ImageRef* RefOf(v1::AnalyzeBatchRequest* m) { return m->mutable_image()->mutable_image(); }

template <typename Request>
void PutBack(const WireBytes& data, Request* m) {
  if (data.size() == 0) return;
  std::string bytes(data.size(), '\0');
  data.CopyTo(0, data.size(), reinterpret_cast<uint8_t*>(bytes.data()));
  v1::ImageRef* ref = RefOf(m);
  if (ref->has_encoded()) {
    ASSERT_EQ(ref->encoded().data(), "");
    ref->mutable_encoded()->set_data(std::move(bytes));
  } else {
    ASSERT_TRUE(ref->has_raw());
    ASSERT_EQ(ref->raw().data(), "");
    ref->mutable_raw()->set_data(std::move(bytes));
  }
}

// Field `number` holding `payload`, encoded by hand so that fields can be put in any order.
std::string Field(int number, const std::string& payload) {
  std::string out;
  for (uint64_t v : {uint64_t(number) << 3 | 2, uint64_t(payload.size())}) {
    for (; v >= 0x80; v >>= 7) out += char((v & 0x7f) | 0x80);
    out += char(v);
  }
  return out + payload;
}

// A random ImageRef's encoding, at times followed by a oneof sibling (an image id) that protobuf
// lets replace it.
std::string RandomRefBytes(Random& r) {
  std::string bytes = RandomRef(r).SerializeAsString();
  if (r.Below(6) == 0) bytes += Field(1, RandomText(r));
  return bytes;
}

// Random requests of each type, with the ImageRef at its place among the other fields, and at
// times a oneof sibling of a field on the way to it.
std::string RandomRequestBytes(v1::HistogramRequest*, Random& r) {
  v1::HistogramRequest m;
  if (r.Below(2) == 0) m.set_variant(RandomText(r));
  if (r.Below(2) == 0) m.mutable_options()->set_bins(r.U32());
  const std::string ref = Field(v1::HistogramRequest::kImageFieldNumber, RandomRefBytes(r));
  return r.Below(2) == 0 ? ref + m.SerializeAsString() : m.SerializeAsString() + ref;
}

std::string RandomRequestBytes(v1::AnalyzeRequest*, Random& r) {
  v1::AnalyzeHeader h;
  if (r.Below(2) == 0) h.add_analyses()->mutable_histogram()->set_variant(RandomText(r));
  if (r.Below(2) == 0) h.set_keep(true);
  if (r.Below(2) == 0) h.set_label(RandomText(r));
  std::string header = Field(v1::AnalyzeHeader::kImageFieldNumber, RandomRefBytes(r));
  header = r.Below(2) == 0 ? header + h.SerializeAsString() : h.SerializeAsString() + header;
  if (r.Below(6) == 0) {  // an upload header after the image, which protobuf lets replace it
    v1::AnalyzeHeader upload;
    upload.mutable_upload()->set_label(RandomText(r));
    header += upload.SerializeAsString();
  }
  v1::AnalyzeRequest chunk;
  if (r.Below(3) == 0) chunk.set_chunk(r.Bytes(8));
  return Field(v1::AnalyzeRequest::kHeaderFieldNumber, header) + chunk.SerializeAsString();
}

std::string RandomRequestBytes(v1::AnalyzeBatchRequest*, Random& r) {
  v1::BatchImage b;
  b.set_key(RandomText(r));
  std::string image = Field(v1::BatchImage::kImageFieldNumber, RandomRefBytes(r));
  image = r.Below(2) == 0 ? image + b.SerializeAsString() : b.SerializeAsString() + image;
  std::string bytes = Field(v1::AnalyzeBatchRequest::kImageFieldNumber, image);
  if (r.Below(6) == 0) {  // a header after the image, which protobuf lets replace it
    v1::AnalyzeBatchRequest header;
    header.mutable_header()->set_max_in_flight(r.U32());
    bytes += header.SerializeAsString();
  }
  return bytes;
}

// Requests of type `Request`, whole, cut, changed and repeated, in random slices: the service's
// parse refuses exactly what protobuf's does, and where it accepts, the message with the bytes
// left in place put back is protobuf's parse.
template <typename Request>
void ExpectImageBytesLeftAsProtobufParses(Random& r) {
  google::protobuf::LogSilencer quiet;
  const std::string type = Request::descriptor()->full_name();
  int held = 0, in_place = 0;
  for (int i = 0; i < 3000 && !::testing::Test::HasFailure(); ++i) {
    SCOPED_TRACE(::testing::Message() << type << " " << i);
    const std::string bytes =
        Variant(RandomRequestBytes(static_cast<Request*>(nullptr), r), i % 4, r);
    Request expected;
    const bool parses = expected.ParseFromString(bytes);
    Request parsed;
    WireBytes data;
    const size_t parts = 1 + r.Below(4);
    const absl::Status s =
        ParseLeavingImageData(Split(bytes, r, parts), "the request", &parsed, &data);
    ASSERT_EQ(s.ok(), parses) << s;
    if (!parses) {
      EXPECT_EQ(std::string(s.message()),
                "the request is not a " + type + ": " + WireFault(bytes, *Request::descriptor()));
      continue;
    }
    held += data.size() > 0;
    in_place += data.size() > 0 && data.slices() == 1;
    PutBack(data, &parsed);
    // (Not EXPECT_EQ: the two encodings run to hundreds of kilobytes.)
    EXPECT_TRUE(parsed.SerializeAsString() == expected.SerializeAsString())
        << "the bytes left in place put back are not protobuf's parse: "
        << parsed.ShortDebugString().substr(0, 300) << " against "
        << expected.ShortDebugString().substr(0, 300);
  }
  EXPECT_GT(held, 150) << type << ": the bytes were hardly ever left in place";
  EXPECT_GT(in_place, 50) << type;
  std::printf("%s: %d of 3000 left in place, %d of them in one slice\n", type.c_str(), held,
              in_place);
}

TEST(WireTest, InlineImageBytesLeftWhereTheyArrivedAreProtobufsParse) {
  GLIMPSE_SEED_TRACE();
  Random r(TestSeed());
  ExpectImageBytesLeftAsProtobufParses<v1::HistogramRequest>(r);
  ExpectImageBytesLeftAsProtobufParses<v1::AnalyzeRequest>(r);
  ExpectImageBytesLeftAsProtobufParses<v1::AnalyzeBatchRequest>(r);
}

TEST(WireTest, RawPixelsReadFromTheSlicesTheyArrivedIn) {
  GLIMPSE_SEED_TRACE();
  Random r(TestSeed());
  v1::HistogramRequest m;
  std::string pixels(size_t(1) << 20, '\0');
  r.Fill(pixels);
  m.mutable_image()->mutable_raw()->set_data(pixels);
  m.mutable_image()->mutable_raw()->mutable_layout()->set_width(1024);
  v1::HistogramRequest parsed;
  WireBytes data;
  ASSERT_TRUE(
      ParseLeavingImageData(Split(m.SerializeAsString(), r, 300), "the request", &parsed, &data)
          .ok());
  ASSERT_EQ(data.size(), pixels.size());
  EXPECT_EQ(parsed.image().raw().layout().width(), 1024u);
  EXPECT_EQ(parsed.image().raw().data(), "");
  std::vector<uint8_t> scratch(5000);
  for (int k = 0; k < 2000; ++k) {
    const size_t at = size_t(r.Below(pixels.size() - 4999)), n = size_t(r.Below(5000));
    const uint8_t* got = data.Read(at, n, scratch.data());
    ASSERT_EQ(std::string_view(reinterpret_cast<const char*>(got), n),
              std::string_view(pixels).substr(at, n));
  }
  const std::span<const uint8_t> whole = data.Contiguous();
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(whole.data()), whole.size()), pixels);
}

}  // namespace
}  // namespace glimpse::testing
