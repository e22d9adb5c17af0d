// Responses encoded without copying their large bytes fields (server/rpc/wire.h): random messages
// of every streamed response type parse back equal to what was encoded, the buffer is as long as
// the message's own encoding, and every large field reaches the buffer as a slice of the very
// string that held it, nothing else large being copied.
#include "server/rpc/wire.h"

#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <gtest/gtest.h>

#include <cstdint>
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

class Random {
 public:
  explicit Random(uint64_t seed) : rng_(seed) {}
  uint64_t Below(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }
  // Sizes on both sides of `min`, and some far above it.
  std::string Bytes(size_t min) {
    const size_t sizes[] = {
        0, 1, min - 1, min, min + 1, size_t(Below(4 * min + 1)), size_t(Below(300000))};
    std::string s(sizes[Below(std::size(sizes))], '\0');
    for (char& c : s) c = char(Below(256));
    return s;
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

}  // namespace
}  // namespace glimpse::testing
