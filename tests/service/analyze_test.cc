// Analyze through the client stub: every analysis in one call, from an upload stream, an inline
// image and a stored id, against the CPU references; the image not kept unless asked; bad input.
#include "server/analyses/analyze.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "gpu/reference/box_filter.h"
#include "gpu/reference/compaction.h"
#include "gpu/reference/histogram.h"
#include "gpu/reference/integral_image.h"
#include "server/ingest/image_codec.h"
#include "tests/service/analyze_test_util.h"
#include "tests/service/service_test_util.h"

namespace glimpse::testing {
namespace {

using gpu::HostImage;
using gpu::ImageDesc;
using gpu::SampleType;

class AnalyzeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server::ServerOptions o;
    o.limits.max_image_pixels = 4'000'000;
    o.limits.max_upload_bytes = 64 << 20;
    ts_ = TestServer::Start(o).release();
  }
  static void TearDownTestSuite() {
    delete ts_;
    ts_ = nullptr;
  }
  void SetUp() override { GLIMPSE_REQUIRE_SERVER(ts_); }
  v1::ImageAnalytics::Stub& stub() { return *ts_->stub; }

  std::vector<v1::ImageInfo> Listed() {
    grpc::ClientContext ctx;
    v1::ListImagesResponse r;
    EXPECT_TRUE(stub().ListImages(&ctx, v1::ListImagesRequest(), &r).ok());
    return {r.images().begin(), r.images().end()};
  }

  static TestServer* ts_;
};
TestServer* AnalyzeTest::ts_ = nullptr;

void ExpectCode(const grpc::Status& s, grpc::StatusCode code, const std::string& needle) {
  EXPECT_EQ(s.error_code(), code) << s.error_message();
  EXPECT_NE(s.error_message().find(needle), std::string::npos)
      << "message \"" << s.error_message() << "\" should mention \"" << needle << "\"";
}

// Checks the messages of AddEveryAnalysis's four analyses (indices 0-3) against the references,
// and that they come in order, each analysis's parts together, the call's Timing last.
void ExpectEveryAnalysisMatchesReference(const std::vector<v1::AnalyzeResponse>& messages,
                                         const HostImage& img) {
  ASSERT_FALSE(messages.empty());
  EXPECT_TRUE(messages.back().has_timing());
  uint32_t last = 0;
  for (const v1::AnalyzeResponse& m : messages) {
    if (m.has_timing()) continue;
    EXPECT_GE(m.index(), last) << "analyses' parts out of order";
    last = m.index();
  }
  // 0: histogram, 64 bins, every channel.
  gpu::HistogramOptions ho;
  ho.bins = 64;
  absl::StatusOr<gpu::HistogramResult> href = reference::Histogram(img, ho);
  ASSERT_TRUE(href.ok());
  int histograms = 0;
  // 1: integral image with the squared table.
  gpu::IntegralImageOptions io;
  io.squared = true;
  absl::StatusOr<gpu::IntegralTables> iref = reference::IntegralImage(img, io);
  ASSERT_TRUE(iref.ok());
  std::string sum, squared;
  bool trailer = false;
  // 2: compaction of channel 0 in [100, 180].
  gpu::CompactionOptions co;
  co.lo = 100;
  co.hi = 180;
  absl::StatusOr<gpu::CompactionResult> cref = reference::Compact(img, co);
  ASSERT_TRUE(cref.ok());
  uint64_t total = 0;
  std::string xy, values;
  // 3: box filter 5x7, raw pixels.
  gpu::BoxFilterOptions bo;
  bo.rx = 2;
  bo.ry = 3;
  absl::StatusOr<HostImage> bref = reference::BoxFilter(img, bo);
  ASSERT_TRUE(bref.ok());
  std::string box;
  for (const v1::AnalyzeResponse& m : messages) {
    switch (m.part_case()) {
      case v1::AnalyzeResponse::kHistogram: {
        EXPECT_EQ(m.index(), 0u);
        ++histograms;
        ASSERT_EQ(m.histogram().histograms_size(), int(href->counts.size()));
        for (size_t h = 0; h < href->counts.size(); ++h) {
          const auto& c = m.histogram().histograms(int(h)).counts();
          EXPECT_EQ(std::vector<uint64_t>(c.begin(), c.end()), href->counts[h])
              << "histogram " << h;
        }
        EXPECT_EQ(m.histogram().image().width(), uint32_t(img.desc.width));
        break;
      }
      case v1::AnalyzeResponse::kIntegralImage:
        EXPECT_EQ(m.index(), 1u);
        if (m.integral_image().has_chunk()) {
          (m.integral_image().chunk().squared() ? squared : sum) +=
              m.integral_image().chunk().data();
        }
        trailer = trailer || m.integral_image().has_trailer();
        break;
      case v1::AnalyzeResponse::kCompaction:
        EXPECT_EQ(m.index(), 2u);
        if (m.compaction().has_header()) total = m.compaction().header().total();
        if (m.compaction().has_chunk()) {
          xy += m.compaction().chunk().xy();
          values += m.compaction().chunk().values();
        }
        break;
      case v1::AnalyzeResponse::kBoxFilter:
        EXPECT_EQ(m.index(), 3u);
        if (m.box_filter().has_chunk()) box += m.box_filter().chunk();
        break;
      default:
        break;
    }
  }
  EXPECT_EQ(histograms, 1);
  EXPECT_TRUE(sum == AsBytes(iref->sum_u)) << "sum table differs";
  EXPECT_TRUE(squared == AsBytes(iref->sq_u)) << "squared table differs";
  EXPECT_TRUE(trailer);
  EXPECT_EQ(total, cref->total);
  EXPECT_TRUE(xy == AsBytes(cref->xy)) << "compaction list differs";
  EXPECT_TRUE(values == AsBytes(cref->values)) << "compaction values differ";
  EXPECT_TRUE(box == AsBytes(bref->data)) << "box filter differs";
}

// A GPU's request path on any renderer (--gpu-paths): 3-channel PNGs decoded into four-channel
// rows, through staging memory when large; raw RGB arrays widened for the plain textures; the
// variants `auto` picks on a GPU; results read back through pinned memory. Every analysis equal to
// its CPU reference, as on the renderer's own paths.
TEST(AnalyzeGpuPathsTest, PhotosThroughAGpusPathsGiveEveryReferenceResult) {
  server::ServerOptions o;
  o.worker.gpu_paths = true;
  o.limits.max_upload_bytes = 64 << 20;
  std::unique_ptr<TestServer> ts = TestServer::Start(o);
  GLIMPSE_REQUIRE_SERVER(ts);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 2);
  // 700x500 RGB: 1.4 MB as four channels, over the size that goes through staging memory.
  for (const ImageDesc& desc :
       {ImageDesc{700, 500, 3, SampleType::kUint8}, ImageDesc{61, 37, 3, SampleType::kUint8},
        ImageDesc{1, 1, 3, SampleType::kUint8}, ImageDesc{257, 129, 1, SampleType::kUint8}}) {
    SCOPED_TRACE(gpu::DescribeImage(desc));
    const HostImage img = RandomImage(desc, rng);
    absl::StatusOr<std::string> png = server::EncodePng(img);
    ASSERT_TRUE(png.ok()) << png.status().message();
    v1::AnalyzeHeader encoded;
    encoded.mutable_image()->mutable_encoded()->set_data(*png);
    AddEveryAnalysis(&encoded);
    AnalyzeCallResult decoded = CallAnalyze(*ts->stub, encoded);
    ASSERT_TRUE(decoded.status.ok()) << decoded.status.error_message();
    ExpectEveryAnalysisMatchesReference(decoded.messages, img);

    v1::AnalyzeHeader raw;
    *raw.mutable_image() = InlineRaw(img);
    AddEveryAnalysis(&raw);
    AnalyzeCallResult widened = CallAnalyze(*ts->stub, raw);
    ASSERT_TRUE(widened.status.ok()) << widened.status.error_message();
    ExpectEveryAnalysisMatchesReference(widened.messages, img);
  }
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  ASSERT_TRUE(ts->stub->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  EXPECT_GT(info.staging_mapped_bytes(), 0u) << "the large PNG did not go through staging memory";
}

TEST(AnalyzeTableTest, EveryAnalysisIsAFieldOfTheRequestAndTheResponse) {
  const std::vector<std::string> names = server::AnalyzeAnalysisNames();
  EXPECT_EQ(names,
            (std::vector<std::string>{"histogram", "integral_image", "compaction", "box_filter"}));
  for (const std::string& n : names) {
    EXPECT_NE(v1::Analysis::descriptor()->FindFieldByName(n), nullptr) << n;
    EXPECT_NE(v1::AnalyzeResponse::descriptor()->FindFieldByName(n), nullptr) << n;
  }
}

TEST_F(AnalyzeTest, UploadStreamInlineAndIdGiveEveryAnalysisItsReferenceResult) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  for (const ImageDesc& desc :
       {ImageDesc{1, 1, 1, SampleType::kUint8}, ImageDesc{97, 61, 4, SampleType::kUint8},
        ImageDesc{65, 1, 3, SampleType::kUint8}, ImageDesc{1, 33, 2, SampleType::kUint8}}) {
    SCOPED_TRACE(gpu::DescribeImage(desc));
    const HostImage img = RandomImage(desc, rng);
    const size_t listed_before = Listed().size();

    v1::AnalyzeHeader upload;
    *upload.mutable_upload()->mutable_raw() = Layout(desc);
    AddEveryAnalysis(&upload);
    AnalyzeCallResult streamed = CallAnalyze(stub(), upload, Bytes(img), 1000);
    ASSERT_TRUE(streamed.status.ok()) << streamed.status.error_message();
    ExpectEveryAnalysisMatchesReference(streamed.messages, img);
    // Not kept: no id in the results, nothing left in the store.
    for (const v1::AnalyzeResponse& m : streamed.messages) {
      EXPECT_FALSE(m.has_kept());
      if (m.has_histogram()) {
        EXPECT_TRUE(m.histogram().image().image_id().empty());
      }
    }
    EXPECT_EQ(Listed().size(), listed_before);

    v1::AnalyzeHeader inline_header;
    *inline_header.mutable_image() = InlineRaw(img);
    AddEveryAnalysis(&inline_header);
    AnalyzeCallResult inlined = CallAnalyze(stub(), inline_header);
    ASSERT_TRUE(inlined.status.ok()) << inlined.status.error_message();
    ExpectEveryAnalysisMatchesReference(inlined.messages, img);

    absl::StatusOr<std::string> id = UploadImage(stub(), img);
    ASSERT_TRUE(id.ok());
    v1::AnalyzeHeader by_id;
    *by_id.mutable_image() = ById(*id);
    AddEveryAnalysis(&by_id);
    AnalyzeCallResult stored = CallAnalyze(stub(), by_id);
    ASSERT_TRUE(stored.status.ok()) << stored.status.error_message();
    ExpectEveryAnalysisMatchesReference(stored.messages, img);
    for (uint32_t i = 0; i < 4; ++i) {
      EXPECT_TRUE(ComparableResult(stored.messages, i) == ComparableResult(streamed.messages, i))
          << "analysis " << i;
    }
  }
}

TEST_F(AnalyzeTest, SixteenBitInlineImageAndRepeatedAnalyses) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 1);
  const ImageDesc desc{33, 17, 2, SampleType::kUint16};
  const HostImage img = RandomImage(desc, rng, 300);
  v1::AnalyzeHeader header;
  *header.mutable_image() = InlineRaw(img);
  AddEveryAnalysis(&header);
  // The same analysis twice with other options: each answers for itself.
  header.add_analyses()->mutable_histogram()->mutable_options()->set_bins(7);
  AnalyzeCallResult r = CallAnalyze(stub(), header);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  std::vector<v1::AnalyzeResponse> first_four;
  for (const v1::AnalyzeResponse& m : r.messages) {
    if (m.index() < 4 && !m.has_timing()) first_four.push_back(m);
  }
  first_four.push_back(r.messages.back());
  ExpectEveryAnalysisMatchesReference(first_four, img);
  gpu::HistogramOptions ho;
  ho.bins = 7;
  absl::StatusOr<gpu::HistogramResult> ref = reference::Histogram(img, ho);
  ASSERT_TRUE(ref.ok());
  int seen = 0;
  for (const v1::AnalyzeResponse& m : r.messages) {
    if (m.index() != 4 || !m.has_histogram()) continue;
    ++seen;
    ASSERT_EQ(m.histogram().histograms_size(), 2);
    for (int h = 0; h < 2; ++h) {
      const auto& c = m.histogram().histograms(h).counts();
      EXPECT_EQ(std::vector<uint64_t>(c.begin(), c.end()), ref->counts[size_t(h)]);
    }
  }
  EXPECT_EQ(seen, 1);
}

TEST_F(AnalyzeTest, KeepStoresTheImageAndNamesItFirst) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 2);
  const HostImage img = RandomImage({40, 30, 3, SampleType::kUint8}, rng);
  v1::AnalyzeHeader header;
  *header.mutable_upload()->mutable_raw() = Layout(img.desc);
  header.set_keep(true);
  header.set_label("kept by analyze");
  header.add_analyses()->mutable_histogram();
  AnalyzeCallResult r = CallAnalyze(stub(), header, Bytes(img));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_GE(r.messages.size(), 3u);
  ASSERT_TRUE(r.messages[0].has_kept());
  const std::string id = r.messages[0].kept().image_id();
  EXPECT_EQ(r.messages[0].kept().label(), "kept by analyze");
  ASSERT_TRUE(r.messages[1].has_histogram());
  EXPECT_EQ(r.messages[1].histogram().image().image_id(), id);
  // The kept image serves later calls by id, with the same result.
  v1::HistogramRequest req;
  *req.mutable_image() = ById(id);
  v1::HistogramResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub().Histogram(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.histograms(0).SerializeAsString(),
            r.messages[1].histogram().histograms(0).SerializeAsString());
}

TEST_F(AnalyzeTest, BadRequestsAreRefusedWithTheirReason) {
  std::mt19937_64 rng(TestSeed() + 3);
  const HostImage img = RandomImage({9, 7, 1, SampleType::kUint8}, rng);
  auto with_image = [&] {
    v1::AnalyzeHeader h;
    *h.mutable_image() = InlineRaw(img);
    return h;
  };
  {  // no analyses
    AnalyzeCallResult r = CallAnalyze(stub(), with_image());
    ExpectCode(r.status, grpc::StatusCode::INVALID_ARGUMENT, "header.analyses must hold 1 to 64");
  }
  {  // too many
    v1::AnalyzeHeader h = with_image();
    for (int i = 0; i < 65; ++i) h.add_analyses()->mutable_histogram();
    ExpectCode(CallAnalyze(stub(), h).status, grpc::StatusCode::INVALID_ARGUMENT, "got 65");
  }
  {  // an empty analysis
    v1::AnalyzeHeader h = with_image();
    h.add_analyses()->mutable_histogram();
    h.add_analyses();
    ExpectCode(CallAnalyze(stub(), h).status, grpc::StatusCode::INVALID_ARGUMENT,
               "header.analyses[1]: must set one analysis: histogram, integral_image, "
               "compaction, box_filter");
  }
  {  // an image inside an analysis
    v1::AnalyzeHeader h = with_image();
    *h.add_analyses()->mutable_compaction()->mutable_image() = ById("x");
    ExpectCode(CallAnalyze(stub(), h).status, grpc::StatusCode::INVALID_ARGUMENT,
               "compaction.image must be unset");
  }
  {  // a bad option (mapping), and one only the image can refute: no result at all
    v1::AnalyzeHeader h = with_image();
    h.add_analyses()->mutable_histogram();
    h.add_analyses()->mutable_box_filter()->mutable_options()->set_border(v1::BorderMode(9));
    AnalyzeCallResult r = CallAnalyze(stub(), h);
    ExpectCode(r.status, grpc::StatusCode::INVALID_ARGUMENT,
               "header.analyses[1]: box_filter: options.border must be a BorderMode (0-3), got 9");
    EXPECT_TRUE(r.messages.empty());
    v1::AnalyzeHeader h2 = with_image();
    h2.add_analyses()->mutable_histogram();
    h2.add_analyses()->mutable_histogram()->mutable_options()->set_bins(70000);
    r = CallAnalyze(stub(), h2);
    ExpectCode(r.status, grpc::StatusCode::INVALID_ARGUMENT, "analyses[1] (histogram): ");
    ExpectCode(r.status, grpc::StatusCode::INVALID_ARGUMENT, "70000");
    EXPECT_TRUE(r.messages.empty());
  }
  {  // no image
    v1::AnalyzeHeader h;
    h.add_analyses()->mutable_histogram();
    ExpectCode(CallAnalyze(stub(), h).status, grpc::StatusCode::INVALID_ARGUMENT,
               "header must set image");
  }
  {  // keep of a stored id; chunks after an inline image
    v1::AnalyzeHeader h;
    *h.mutable_image() = ById("0123456789abcdef0123456789abcdef");
    h.set_keep(true);
    h.add_analyses()->mutable_histogram();
    ExpectCode(CallAnalyze(stub(), h).status, grpc::StatusCode::INVALID_ARGUMENT,
               "keep is for inline or uploaded images");
    v1::AnalyzeHeader h2 = with_image();
    h2.add_analyses()->mutable_histogram();
    ExpectCode(CallAnalyze(stub(), h2, "bytes").status, grpc::StatusCode::INVALID_ARGUMENT,
               "chunk must be empty unless header.upload is set");
  }
  {  // an unknown id
    v1::AnalyzeHeader h;
    *h.mutable_image() = ById("0123456789abcdef0123456789abcdef");
    h.add_analyses()->mutable_histogram();
    ExpectCode(CallAnalyze(stub(), h).status, grpc::StatusCode::NOT_FOUND,
               "0123456789abcdef0123456789abcdef");
  }
  {  // an upload shorter than its layout, and one longer
    v1::AnalyzeHeader h;
    *h.mutable_upload()->mutable_raw() = Layout(img.desc);
    h.add_analyses()->mutable_histogram();
    ExpectCode(CallAnalyze(stub(), h, Bytes(img).substr(1)).status,
               grpc::StatusCode::INVALID_ARGUMENT, "header.upload.raw");
    ExpectCode(CallAnalyze(stub(), h, Bytes(img) + "x").status, grpc::StatusCode::INVALID_ARGUMENT,
               "more bytes than header.upload.raw");
  }
  {  // no header at all
    grpc::ClientContext ctx;
    auto stream = stub().Analyze(&ctx);
    stream->WritesDone();
    v1::AnalyzeResponse r;
    while (stream->Read(&r)) {
    }
    ExpectCode(stream->Finish(), grpc::StatusCode::INVALID_ARGUMENT, "had no header");
  }
}

}  // namespace
}  // namespace glimpse::testing
