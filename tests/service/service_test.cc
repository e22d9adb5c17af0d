// The ImageAnalytics service through the generated client stub, against a real server on an
// ephemeral port: every RPC against the CPU references, chaining, large streamed results,
// health, reflection, and every kind of bad input.
#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>

#include "common/stb_write.h"
#include "gpu/reference/box_filter.h"
#include "gpu/reference/compaction.h"
#include "gpu/reference/histogram.h"
#include "gpu/reference/integral_image.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "server/rpc/limits.h"
#include "server/worker/gpu_worker.h"
#include "server/worker/host_pool.h"
#include "tests/service/service_test_util.h"

namespace glimpse::testing {
namespace {

using gpu::HostImage;
using gpu::ImageDesc;
using gpu::SampleType;

constexpr uint64_t kMaxPixels = 4'000'000;
constexpr uint64_t kMaxUpload = 64 << 20;

class ServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server::ServerOptions o;
    o.limits.max_image_pixels = kMaxPixels;
    o.limits.max_upload_bytes = kMaxUpload;
    ts_ = TestServer::Start(o).release();
  }
  static void TearDownTestSuite() {
    delete ts_;
    ts_ = nullptr;
  }
  void SetUp() override { GLIMPSE_REQUIRE_SERVER(ts_); }
  void TearDown() override {
    // Whatever the test sent, the server still serves.
    if (ts_ != nullptr && ts_->server != nullptr) ExpectServing();
  }

  v1::ImageAnalytics::Stub& stub() { return *ts_->stub; }

  void ExpectServing() {
    auto health = grpc::health::v1::Health::NewStub(ts_->channel);
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    ASSERT_TRUE(health->Check(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }

  grpc::Status Histogram(const v1::HistogramRequest& req, v1::HistogramResponse* resp) {
    grpc::ClientContext ctx;
    return stub().Histogram(&ctx, req, resp);
  }

  static TestServer* ts_;
};
TestServer* ServiceTest::ts_ = nullptr;

std::mt19937_64 Rng() { return std::mt19937_64(TestSeed()); }

void ExpectCode(const grpc::Status& s, grpc::StatusCode code, const std::string& needle) {
  EXPECT_EQ(s.error_code(), code) << s.error_message();
  EXPECT_NE(s.error_message().find(needle), std::string::npos)
      << "message \"" << s.error_message() << "\" should mention \"" << needle << "\"";
}

void ExpectHistogramEquals(const v1::HistogramResponse& r, const gpu::HistogramResult& ref) {
  EXPECT_EQ(r.bins(), uint32_t(ref.bins));
  EXPECT_EQ(r.lo(), ref.lo);
  EXPECT_EQ(r.hi(), ref.hi);
  ASSERT_EQ(r.histograms_size(), int(ref.counts.size()));
  for (size_t h = 0; h < ref.counts.size(); ++h) {
    std::vector<uint64_t> got(r.histograms(int(h)).counts().begin(),
                              r.histograms(int(h)).counts().end());
    EXPECT_EQ(got, ref.counts[h]) << "histogram " << h;
  }
}

// ---- health, reflection, info -----------------------------------------------------------------

TEST_F(ServiceTest, HealthServingForServerAndService) {
  auto health = grpc::health::v1::Health::NewStub(ts_->channel);
  for (const std::string service : {"", "glimpse.v1.ImageAnalytics"}) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    ASSERT_TRUE(health->Check(&ctx, req, &resp).ok()) << service;
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING) << service;
  }
  grpc::ClientContext ctx;
  grpc::health::v1::HealthCheckRequest req;
  req.set_service("no.such.Service");
  grpc::health::v1::HealthCheckResponse resp;
  EXPECT_EQ(health->Check(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceTest, ReflectionListsTheServices) {
  absl::StatusOr<std::string> answer = ListServicesByReflection(ts_->channel);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_NE(answer->find("glimpse.v1.ImageAnalytics"), std::string::npos);
  EXPECT_NE(answer->find("grpc.health.v1.Health"), std::string::npos);
}

TEST_F(ServiceTest, ServerInfoDescribesDeviceAndSettings) {
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  ASSERT_TRUE(stub().GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  EXPECT_FALSE(info.renderer().empty());
  EXPECT_FALSE(info.gl_version().empty());
  EXPECT_GE(info.limits().max_texture_size(), 1024u);
  EXPECT_EQ(info.max_image_pixels(), kMaxPixels);
  EXPECT_EQ(info.max_upload_bytes(), kMaxUpload);
  EXPECT_EQ(info.max_queue(), 64u);
  ASSERT_GE(info.analyses_size(), 1);
  EXPECT_EQ(info.analyses(0), "histogram");
  // Every analysis lists its variants, "auto" first, each one a name the server takes.
  ASSERT_EQ(info.analysis_info_size(), info.analyses_size());
  for (int i = 0; i < info.analyses_size(); ++i) {
    const v1::AnalysisInfo& a = info.analysis_info(i);
    EXPECT_EQ(a.name(), info.analyses(i));
    ASSERT_GE(a.variants_size(), 2) << a.name();
    EXPECT_EQ(a.variants(0), "auto");
  }
  const v1::AnalysisInfo& histogram = info.analysis_info(0);
  for (const std::string& v : histogram.variants()) {
    v1::HistogramRequest req;
    *req.mutable_image() = InlineRaw(HostImage::Zeros({3, 2, 1, SampleType::kUint8}));
    req.set_variant(v);
    v1::HistogramResponse resp;
    EXPECT_TRUE(Histogram(req, &resp).ok()) << v;
  }
}

// ---- upload and the store ---------------------------------------------------------------------

TEST_F(ServiceTest, RawUploadRoundTripsEveryFormatAndChannelCount) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng = Rng();
  const std::pair<int, int> sizes[] = {{1, 1}, {1, 37}, {41, 1}, {67, 29}};
  const bool software = ServerIsSoftware(stub());
  int n = 0;
  for (SampleType type : {SampleType::kUint8, SampleType::kUint16, SampleType::kFloat32}) {
    for (int channels = 1; channels <= 4; ++channels) {
      const auto [w, h] = sizes[n++ % 4];
      const ImageDesc desc{w, h, channels, type};
      SCOPED_TRACE(gpu::DescribeImage(desc));
      HostImage img = RandomImage(desc, rng);
      v1::UploadHeader header;
      *header.mutable_raw() = Layout(desc);
      header.set_label("raw test");
      v1::UploadImageResponse up;
      // Odd chunk sizes: the server must not care where chunks split.
      ASSERT_TRUE(UploadRaw(stub(), header, Bytes(img), &up, 7 + n).ok());
      const v1::ImageInfo& info = up.image();
      EXPECT_EQ(info.image_id().size(), 32u);
      EXPECT_EQ(info.width(), uint32_t(w));
      EXPECT_EQ(info.height(), uint32_t(h));
      EXPECT_EQ(info.channels(), uint32_t(channels));
      EXPECT_EQ(info.format(), ProtoFormat(type));
      EXPECT_EQ(info.bytes(), StoredBytes(desc, software));
      EXPECT_EQ(info.label(), "raw test");

      grpc::ClientContext ctx;
      v1::GetImageInfoRequest req;
      req.set_image_id(info.image_id());
      v1::ImageInfo got;
      ASSERT_TRUE(stub().GetImageInfo(&ctx, req, &got).ok());
      EXPECT_EQ(got.width(), info.width());
      EXPECT_EQ(got.origin(), "upload");

      // The stored pixels are the uploaded ones: a 1-bin-per-value histogram sees them all.
      v1::HistogramRequest hreq;
      *hreq.mutable_image() = ById(info.image_id());
      v1::HistogramResponse hresp;
      ASSERT_TRUE(Histogram(hreq, &hresp).ok());
      absl::StatusOr<gpu::HistogramResult> ref = reference::Histogram(img, {});
      ASSERT_TRUE(ref.ok());
      ExpectHistogramEquals(hresp, *ref);
      EXPECT_EQ(hresp.image().image_id(), info.image_id());

      grpc::ClientContext dctx;
      v1::DeleteImageRequest dreq;
      dreq.set_image_id(info.image_id());
      v1::DeleteImageResponse dresp;
      ASSERT_TRUE(stub().DeleteImage(&dctx, dreq, &dresp).ok());
      EXPECT_EQ(dresp.freed_bytes(), StoredBytes(desc, software));
      grpc::ClientContext ctx2;
      ExpectCode(stub().GetImageInfo(&ctx2, req, &got), grpc::StatusCode::NOT_FOUND,
                 info.image_id());
    }
  }
}

TEST_F(ServiceTest, ImageIdsAreRandomAndListed) {
  HostImage img = HostImage::Zeros({3, 2, 1, SampleType::kUint8});
  std::set<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::string> id = UploadImage(stub(), img);
    ASSERT_TRUE(id.ok());
    ids.insert(*id);
  }
  EXPECT_EQ(ids.size(), 3u);
  grpc::ClientContext ctx;
  v1::ListImagesResponse list;
  ASSERT_TRUE(stub().ListImages(&ctx, v1::ListImagesRequest(), &list).ok());
  int found = 0;
  for (const v1::ImageInfo& i : list.images()) found += ids.count(i.image_id());
  EXPECT_EQ(found, 3);
  EXPECT_GT(list.budget_bytes(), 0u);
  for (const std::string& id : ids) {
    grpc::ClientContext dctx;
    v1::DeleteImageRequest dreq;
    dreq.set_image_id(id);
    v1::DeleteImageResponse dresp;
    EXPECT_TRUE(stub().DeleteImage(&dctx, dreq, &dresp).ok());
  }
}

std::string StbFile(int (*write)(stbi_write_func*, void*, int, int, int, const void*),
                    const HostImage& img) {
  std::string out;
  write(&AppendToString, &out, img.desc.width, img.desc.height, img.desc.channels, img.data.data());
  return out;
}

std::string PngFile(const HostImage& img) {
  return StbPngFile(img.data.data(), img.desc.width, img.desc.height, img.desc.channels,
                    int(img.desc.row_bytes()));
}

// 16-bit binary PGM (P5, maxval 65535, big-endian samples).
std::string Pgm16File(const HostImage& img) {
  std::string out =
      "P5\n" + std::to_string(img.desc.width) + " " + std::to_string(img.desc.height) + "\n65535\n";
  for (size_t i = 0; i < img.data.size(); i += 2) {
    out += char(img.data[i + 1]);
    out += char(img.data[i]);
  }
  return out;
}

TEST_F(ServiceTest, EncodedUploadsDecodeToTheirPixels) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng = Rng();
  HostImage rgb = RandomImage({53, 31, 3, SampleType::kUint8}, rng);
  HostImage rgba = RandomImage({17, 40, 4, SampleType::kUint8}, rng);
  HostImage grey16 = RandomImage({29, 23, 1, SampleType::kUint16}, rng);
  struct Case {
    std::string name, file;
    const HostImage* pixels;
  };
  const Case cases[] = {
      {"png rgb", PngFile(rgb), &rgb},
      {"png rgba", PngFile(rgba), &rgba},
      {"bmp rgb", StbFile(stbi_write_bmp_to_func, rgb), &rgb},
      {"tga rgba", StbFile(stbi_write_tga_to_func, rgba), &rgba},
      {"pgm 16-bit", Pgm16File(grey16), &grey16},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<gpu::HistogramResult> ref = reference::Histogram(*c.pixels, {});
    ASSERT_TRUE(ref.ok());
    // Uploaded by stream...
    v1::UploadHeader header;
    header.mutable_encoded();
    v1::UploadImageResponse up;
    ASSERT_TRUE(UploadRaw(stub(), header, c.file, &up, 1000).ok());
    EXPECT_EQ(up.image().width(), uint32_t(c.pixels->desc.width));
    EXPECT_EQ(up.image().channels(), uint32_t(c.pixels->desc.channels));
    EXPECT_EQ(up.image().format(), ProtoFormat(c.pixels->desc.type));
    v1::HistogramRequest req;
    *req.mutable_image() = ById(up.image().image_id());
    v1::HistogramResponse by_id;
    ASSERT_TRUE(Histogram(req, &by_id).ok());
    ExpectHistogramEquals(by_id, *ref);
    // ... and inline.
    req.mutable_image()->mutable_encoded()->set_data(c.file);
    v1::HistogramResponse inline_resp;
    ASSERT_TRUE(Histogram(req, &inline_resp).ok());
    ExpectHistogramEquals(inline_resp, *ref);
    EXPECT_TRUE(inline_resp.image().image_id().empty());
    EXPECT_GT(inline_resp.timing().decode_ns(), 0u);
  }
  // desired_channels converts on decode.
  v1::HistogramRequest req;
  req.mutable_image()->mutable_encoded()->set_data(PngFile(rgba));
  req.mutable_image()->mutable_encoded()->set_desired_channels(1);
  v1::HistogramResponse resp;
  ASSERT_TRUE(Histogram(req, &resp).ok());
  EXPECT_EQ(resp.image().channels(), 1u);
  EXPECT_EQ(resp.total(), uint64_t(rgba.desc.pixels()));
  // ... from 0 to 4, refused past that with the field, the rule and the value.
  req.mutable_image()->mutable_encoded()->set_desired_channels(5);
  ExpectCode(Histogram(req, &resp), grpc::StatusCode::INVALID_ARGUMENT,
             "image.encoded.desired_channels must be 0 (the file's own channels) to 4, got 5");
  // An orientation the proto does not define is refused naming the field, the values and it.
  req.mutable_image()->mutable_encoded()->set_desired_channels(0);
  req.mutable_image()->mutable_encoded()->set_orientation(v1::Orientation(3));
  ExpectCode(Histogram(req, &resp), grpc::StatusCode::INVALID_ARGUMENT,
             "image.encoded.orientation must be ORIENTATION_FROM_FILE (1) or "
             "ORIENTATION_AS_STORED (2), got 3");
}

// ---- analyses ---------------------------------------------------------------------------------

TEST_F(ServiceTest, HistogramMatchesReferenceForOptionsAndInputs) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng = Rng();
  for (SampleType type : {SampleType::kUint8, SampleType::kUint16, SampleType::kFloat32}) {
    const ImageDesc desc{101, 67, 4, type};
    SCOPED_TRACE(gpu::DescribeImage(desc));
    HostImage img = RandomImage(desc, rng);
    absl::StatusOr<std::string> id = UploadImage(stub(), img);
    ASSERT_TRUE(id.ok());
    struct Opt {
      v1::HistogramSource source;
      gpu::HistogramSource gsource;
      uint32_t bins, channel;
      std::string variant;
    };
    const Opt opts[] = {
        {v1::HISTOGRAM_SOURCE_UNSPECIFIED, gpu::HistogramSource::kAllChannels, 256, 0, ""},
        {v1::HISTOGRAM_SOURCE_CHANNEL, gpu::HistogramSource::kChannel, 17, 2, "global_atomics"},
        {v1::HISTOGRAM_SOURCE_LUMA, gpu::HistogramSource::kLuma, 64, 0, "auto"},
        {v1::HISTOGRAM_SOURCE_RGB_MEAN, gpu::HistogramSource::kRgbMean, 1000, 0, "private_rows"},
    };
    for (const Opt& o : opts) {
      SCOPED_TRACE(::testing::Message() << "source " << int(o.source) << " bins " << o.bins);
      v1::HistogramRequest req;
      req.mutable_options()->set_source(o.source);
      req.mutable_options()->set_bins(o.bins);
      req.mutable_options()->set_channel(o.channel);
      req.set_variant(o.variant);
      gpu::HistogramOptions ref_opt;
      ref_opt.source = o.gsource;
      ref_opt.bins = int(o.bins);
      ref_opt.channel = int(o.channel);
      if (type == SampleType::kFloat32) {
        req.mutable_options()->set_lo(-0.5);
        req.mutable_options()->set_hi(1.5);
        ref_opt.lo = -0.5;
        ref_opt.hi = 1.5;
      }
      absl::StatusOr<gpu::HistogramResult> ref = reference::Histogram(img, ref_opt);
      ASSERT_TRUE(ref.ok());
      for (bool inline_image : {false, true}) {
        *req.mutable_image() = inline_image ? InlineRaw(img) : ById(*id);
        v1::HistogramResponse resp;
        grpc::Status s = Histogram(req, &resp);
        ASSERT_TRUE(s.ok()) << s.error_message();
        ExpectHistogramEquals(resp, *ref);
        if (!o.variant.empty() && o.variant != "auto") {
          EXPECT_EQ(resp.variant(), o.variant);
        }
        EXPECT_FALSE(resp.variant().empty());
        EXPECT_GE(resp.timing().server_ns(), resp.timing().queue_ns());
      }
    }
  }
}

// The variants GetServerInfo lists for `analysis` (empty, with a failure, where it lists none),
// after checking that `ballot_variant` is among them exactly where the device has subgroup
// ballots (*ballots), as llvmpipe has.
std::vector<std::string> ListedVariants(v1::ImageAnalytics::Stub& stub, std::string_view analysis,
                                        std::string_view ballot_variant, bool* ballots) {
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  if (grpc::Status s = stub.GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info); !s.ok()) {
    ADD_FAILURE() << s.error_message();
    return {};
  }
  *ballots = info.limits().subgroup_ballot();
  if (info.software()) {
    EXPECT_TRUE(*ballots) << info.renderer();
  }
  for (const v1::AnalysisInfo& a : info.analysis_info()) {
    if (a.name() != analysis) continue;
    std::vector<std::string> names(a.variants().begin(), a.variants().end());
    EXPECT_EQ(std::count(names.begin(), names.end(), ballot_variant), *ballots ? 1 : 0) << analysis;
    return names;
  }
  ADD_FAILURE() << "GetServerInfo lists no variants for " << analysis;
  return {};
}

struct IntegralStream {
  v1::IntegralHeader header;
  v1::IntegralTrailer trailer;
  std::string sum, squared;
  size_t messages = 0, largest = 0;
  grpc::Status status;
};

IntegralStream ReadIntegral(v1::ImageAnalytics::Stub& stub, const v1::IntegralImageRequest& req) {
  IntegralStream out;
  grpc::ClientContext ctx;
  auto reader = stub.IntegralImage(&ctx, req);
  v1::IntegralImageResponse m;
  uint32_t next_row[2] = {0, 0};
  while (reader->Read(&m)) {
    ++out.messages;
    out.largest = std::max(out.largest, m.ByteSizeLong());
    if (m.has_header()) out.header = m.header();
    if (m.has_chunk()) {
      const bool sq = m.chunk().squared();
      EXPECT_EQ(m.chunk().y0(), next_row[sq]) << "bands arrive top to bottom";
      next_row[sq] += m.chunk().rows();
      (sq ? out.squared : out.sum) += m.chunk().data();
    }
    if (m.has_trailer()) out.trailer = m.trailer();
  }
  out.status = reader->Finish();
  return out;
}

TEST_F(ServiceTest, IntegralImageMatchesReference) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng = Rng();
  const ImageDesc descs[] = {{1, 1, 1, SampleType::kUint8},
                             {97, 13, 3, SampleType::kUint8},
                             {31, 45, 2, SampleType::kUint16},
                             {23, 19, 4, SampleType::kFloat32}};
  for (const ImageDesc& desc : descs) {
    SCOPED_TRACE(gpu::DescribeImage(desc));
    HostImage img = RandomImage(desc, rng);
    gpu::IntegralImageOptions opt;
    opt.squared = true;
    absl::StatusOr<gpu::IntegralTables> ref = reference::IntegralImage(img, opt);
    ASSERT_TRUE(ref.ok());
    v1::IntegralImageRequest req;
    *req.mutable_image() = InlineRaw(img);
    req.mutable_options()->set_squared(true);
    // The reference sums floats in the naive variant's order.
    if (desc.type == SampleType::kFloat32) req.set_variant("naive");
    IntegralStream got = ReadIntegral(stub(), req);
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    EXPECT_EQ(got.header.width(), uint32_t(desc.width));
    EXPECT_EQ(got.header.height(), uint32_t(desc.height));
    EXPECT_EQ(got.header.channels(), uint32_t(desc.channels));
    EXPECT_TRUE(got.header.squared());
    if (desc.type == SampleType::kFloat32) {
      EXPECT_EQ(got.header.element(), v1::INTEGRAL_ELEMENT_FLOAT64);
      EXPECT_TRUE(got.sum == AsBytes(ref->sum_f));
      EXPECT_TRUE(got.squared == AsBytes(ref->sq_f));
    } else {
      EXPECT_EQ(got.header.element(), v1::INTEGRAL_ELEMENT_UINT64);
      EXPECT_TRUE(got.sum == AsBytes(ref->sum_u));
      EXPECT_TRUE(got.squared == AsBytes(ref->sq_u));
    }
    EXPECT_EQ(got.header.table_bytes(), got.sum.size());
    EXPECT_FALSE(got.trailer.variant().empty());
  }
}

// The integral variants GetServerInfo lists are the ones this server's device runs (subgroup_scan
// only with subgroup ballots, which llvmpipe has), and each one answers exactly; subgroup_scan on
// a float image is refused naming the variant and the sample type.
TEST_F(ServiceTest, EveryListedIntegralVariantRuns) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng = Rng();
  bool ballots = false;
  const std::vector<std::string> variants =
      ListedVariants(stub(), "integral_image", "subgroup_scan", &ballots);
  ASSERT_FALSE(variants.empty());
  const HostImage img = RandomImage({517, 9, 2, SampleType::kUint8}, rng);
  absl::StatusOr<gpu::IntegralTables> ref = reference::IntegralImage(img, {.squared = true});
  ASSERT_TRUE(ref.ok());
  for (const std::string& v : variants) {
    v1::IntegralImageRequest req;
    *req.mutable_image() = InlineRaw(img);
    req.mutable_options()->set_squared(true);
    req.set_variant(v);
    IntegralStream got = ReadIntegral(stub(), req);
    ASSERT_TRUE(got.status.ok()) << v << ": " << got.status.error_message();
    EXPECT_TRUE(got.sum == AsBytes(ref->sum_u)) << v;
    EXPECT_TRUE(got.squared == AsBytes(ref->sq_u)) << v;
    if (v != "auto") {
      EXPECT_EQ(got.trailer.variant(), v);
    }
  }
  if (ballots) {
    v1::IntegralImageRequest req;
    *req.mutable_image() = InlineRaw(RandomImage({5, 4, 1, SampleType::kFloat32}, rng));
    req.set_variant("subgroup_scan");
    ExpectCode(ReadIntegral(stub(), req).status, grpc::StatusCode::INVALID_ARGUMENT,
               "variant subgroup_scan takes 8- and 16-bit images, got float32 samples");
  }
}

// 800x800 RGBA: a 20 MB table, far over the client's 4 MiB message limit, arrives in chunks.
TEST_F(ServiceTest, LargeIntegralResultStreamsInChunks) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng = Rng();
  HostImage img = RandomImage({800, 800, 4, SampleType::kUint8}, rng);
  absl::StatusOr<std::string> id = UploadImage(stub(), img);
  ASSERT_TRUE(id.ok());
  absl::StatusOr<gpu::IntegralTables> ref = reference::IntegralImage(img, {});
  ASSERT_TRUE(ref.ok());
  v1::IntegralImageRequest req;
  *req.mutable_image() = ById(*id);
  IntegralStream got = ReadIntegral(stub(), req);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  ASSERT_EQ(got.sum.size(), size_t(800) * 800 * 4 * 8);
  EXPECT_GT(got.sum.size(), size_t(4) << 20);
  EXPECT_TRUE(got.sum == AsBytes(ref->sum_u));
  EXPECT_GT(got.messages, 5u);
  EXPECT_LE(got.largest, size_t(2) << 20);
  EXPECT_GT(got.trailer.timing().gpu_ns(), 0u);
}

struct CompactStream {
  v1::CompactHeader header;
  std::string xy, values;
  std::vector<size_t> chunks;  // entries per chunk
  v1::Timing timing;
  grpc::Status status;
};

CompactStream ReadCompact(v1::ImageAnalytics::Stub& stub, const v1::CompactRequest& req) {
  CompactStream out;
  grpc::ClientContext ctx;
  auto reader = stub.Compact(&ctx, req);
  v1::CompactResponse m;
  while (reader->Read(&m)) {
    if (m.has_header()) out.header = m.header();
    if (m.has_chunk()) {
      EXPECT_EQ(m.chunk().first(), out.xy.size() / 8);
      out.xy += m.chunk().xy();
      out.values += m.chunk().values();
      out.chunks.push_back(m.chunk().xy().size() / 8);
    }
    if (m.has_timing()) out.timing = m.timing();
  }
  out.status = reader->Finish();
  return out;
}

// The compaction variants GetServerInfo lists are the ones this server's device runs
// (subgroup_aggregated only with subgroup ballots, which llvmpipe has), and each one answers.
TEST_F(ServiceTest, EveryListedCompactionVariantRuns) {
  bool ballots = false;
  const std::vector<std::string> variants =
      ListedVariants(stub(), "compaction", "subgroup_aggregated", &ballots);
  ASSERT_FALSE(variants.empty());
  for (const std::string& v : variants) {
    v1::CompactRequest req;
    *req.mutable_image() = InlineRaw(HostImage::Zeros({3, 2, 1, SampleType::kUint8}));
    req.mutable_options()->set_hi(10);  // every pixel (0) passes
    req.set_variant(v);
    CompactStream got = ReadCompact(stub(), req);
    ASSERT_TRUE(got.status.ok()) << v << ": " << got.status.error_message();
    EXPECT_EQ(got.header.total(), 6u) << v;
    EXPECT_EQ(got.xy.size(), 6u * 8) << v;
  }
}

TEST_F(ServiceTest, CompactMatchesReference) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng = Rng();
  struct Case {
    ImageDesc desc;
    v1::CompactSource source;
    uint32_t channel;
    double lo, hi;
    bool outside, count_only;
    int64_t max_results;  // -1: default
  };
  const Case cases[] = {
      {{83, 61, 1, SampleType::kUint8}, v1::COMPACT_SOURCE_CHANNEL, 0, 100, 180, false, false, -1},
      {{47, 53, 3, SampleType::kUint8}, v1::COMPACT_SOURCE_LUMA, 0, 0, 60, true, false, 100},
      {{64, 33, 2, SampleType::kUint16},
       v1::COMPACT_SOURCE_CHANNEL,
       1,
       1000,
       30000,
       false,
       false,
       -1},
      {{29, 31, 4, SampleType::kFloat32},
       v1::COMPACT_SOURCE_CHANNEL,
       3,
       0.25,
       0.75,
       false,
       false,
       0},
      {{29, 31, 4, SampleType::kFloat32}, v1::COMPACT_SOURCE_LUMA, 0, 0, 1, true, true, -1},
      // Lists of several messages: all 614400 pixels (5.5 MB), and a cap inside a message.
      {{1024, 600, 1, SampleType::kUint8}, v1::COMPACT_SOURCE_CHANNEL, 0, 0, 255, false, false, -1},
      {{1024, 600, 1, SampleType::kUint8},
       v1::COMPACT_SOURCE_CHANNEL,
       0,
       30,
       200,
       false,
       false,
       300001},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(gpu::DescribeImage(c.desc));
    HostImage img = RandomImage(c.desc, rng);
    gpu::CompactionOptions opt;
    opt.source = c.source == v1::COMPACT_SOURCE_LUMA ? gpu::CompactionSource::kLuma
                                                     : gpu::CompactionSource::kChannel;
    opt.channel = int(c.channel);
    opt.lo = c.lo;
    opt.hi = c.hi;
    opt.inside = !c.outside;
    opt.count_only = c.count_only;
    if (c.max_results >= 0) opt.max_results = c.max_results;
    absl::StatusOr<gpu::CompactionResult> ref = reference::Compact(img, opt);
    ASSERT_TRUE(ref.ok());
    v1::CompactRequest req;
    *req.mutable_image() = InlineRaw(img);
    v1::CompactOptions* o = req.mutable_options();
    o->set_source(c.source);
    o->set_channel(c.channel);
    o->set_lo(c.lo);
    o->set_hi(c.hi);
    o->set_outside(c.outside);
    o->set_count_only(c.count_only);
    if (c.max_results >= 0) o->set_max_results(c.max_results);
    CompactStream got = ReadCompact(stub(), req);
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    EXPECT_EQ(got.header.total(), ref->total);
    EXPECT_EQ(got.header.truncated(), ref->truncated);
    EXPECT_EQ(got.header.returned(), ref->xy.size() / 2);
    EXPECT_EQ(got.header.value_channels(), uint32_t(c.desc.channels));
    EXPECT_TRUE(got.xy == AsBytes(ref->xy));
    EXPECT_TRUE(got.values == AsBytes(ref->values));
    // Messages of as many entries as fit the service's chunk, the last one the rest.
    const size_t per_chunk =
        server::ServiceLimits{}.chunk_bytes / (8 + c.desc.channels * BytesPerSample(c.desc.type));
    for (size_t i = 0; i + 1 < got.chunks.size(); ++i) EXPECT_EQ(got.chunks[i], per_chunk);
    EXPECT_EQ(got.chunks.size(), (ref->xy.size() / 2 + per_chunk - 1) / per_chunk);
  }
}

struct BoxStream {
  v1::BoxFilterHeader header;
  std::string data;
  std::vector<size_t> chunks;  // each chunk's size
  v1::Timing timing;
  grpc::Status status;
};

BoxStream ReadBox(v1::ImageAnalytics::Stub& stub, const v1::BoxFilterRequest& req) {
  BoxStream out;
  grpc::ClientContext ctx;
  auto reader = stub.BoxFilter(&ctx, req);
  v1::BoxFilterResponse m;
  while (reader->Read(&m)) {
    if (m.has_header()) out.header = m.header();
    if (m.has_chunk()) {
      out.data += m.chunk();
      out.chunks.push_back(m.chunk().size());
    }
    if (m.has_timing()) out.timing = m.timing();
  }
  out.status = reader->Finish();
  return out;
}

TEST_F(ServiceTest, BoxFilterMatchesReference) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng = Rng();
  struct Case {
    ImageDesc desc;
    uint32_t rx, ry;
    v1::BorderMode border;
    gpu::BorderMode gborder;
    double value;
  };
  const Case cases[] = {
      {{1, 1, 1, SampleType::kUint8},
       1,
       1,
       v1::BORDER_MODE_UNSPECIFIED,
       gpu::BorderMode::kReflect101,
       0},
      {{61, 37, 3, SampleType::kUint8},
       2,
       5,
       v1::BORDER_MODE_REPLICATE,
       gpu::BorderMode::kReplicate,
       0},
      {{33, 41, 2, SampleType::kUint16},
       3,
       1,
       v1::BORDER_MODE_CONSTANT,
       gpu::BorderMode::kConstant,
       1000},
      {{27, 19, 4, SampleType::kFloat32},
       1,
       2,
       v1::BORDER_MODE_REFLECT101,
       gpu::BorderMode::kReflect101,
       0},
      // Several chunks, rows of 3903 bytes (padded in the packed form on CPU renderers).
      {{1301, 811, 3, SampleType::kUint8},
       7,
       4,
       v1::BORDER_MODE_CONSTANT,
       gpu::BorderMode::kConstant,
       77},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(gpu::DescribeImage(c.desc));
    HostImage img = RandomImage(c.desc, rng);
    gpu::BoxFilterOptions opt;
    opt.rx = int(c.rx);
    opt.ry = int(c.ry);
    opt.border = c.gborder;
    opt.border_value = c.value;
    absl::StatusOr<HostImage> ref = reference::BoxFilter(img, opt);
    ASSERT_TRUE(ref.ok());
    v1::BoxFilterRequest req;
    *req.mutable_image() = InlineRaw(img);
    req.mutable_options()->set_rx(c.rx);
    req.mutable_options()->set_ry(c.ry);
    req.mutable_options()->set_border(c.border);
    req.mutable_options()->set_border_value(c.value);
    req.set_encoding(v1::PIXEL_ENCODING_RAW);
    BoxStream got = ReadBox(stub(), req);
    ASSERT_TRUE(got.status.ok()) << got.status.error_message();
    EXPECT_EQ(got.header.encoding(), v1::PIXEL_ENCODING_RAW);
    EXPECT_EQ(got.header.data_bytes(), got.data.size());
    EXPECT_TRUE(got.header.result().image_id().empty());
    // Chunks of the service's chunk size, the last one the rest.
    const size_t chunk = server::ServiceLimits{}.chunk_bytes;
    for (size_t i = 0; i + 1 < got.chunks.size(); ++i) EXPECT_EQ(got.chunks[i], chunk);
    EXPECT_EQ(got.chunks.size(), (got.data.size() + chunk - 1) / chunk);
    if (c.desc.type != SampleType::kFloat32) {
      EXPECT_TRUE(got.data == Bytes(*ref));
      continue;
    }
    // Floats: within gpu/box_filter.h's stated bound (|v| < 2 here), doubled.
    ASSERT_EQ(got.data.size(), ref->data.size());
    for (size_t i = 0; i < got.data.size(); i += 4) {
      float g, r;
      std::memcpy(&g, got.data.data() + i, 4);
      std::memcpy(&r, ref->data.data() + i, 4);
      ASSERT_LE(std::abs(double(g) - r),
                std::ldexp(std::abs(double(r)), -23) + std::ldexp(2.0, -30))
          << "sample " << i / 4;
    }
  }
}

// BoxFilter keeps its result as a new image; Histogram reads it by id with no round trip.
TEST_F(ServiceTest, BoxFilterChainsIntoHistogramById) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng = Rng();
  HostImage img = RandomImage({150, 110, 4, SampleType::kUint8}, rng);
  absl::StatusOr<std::string> id = UploadImage(stub(), img);
  ASSERT_TRUE(id.ok());
  v1::BoxFilterRequest req;
  *req.mutable_image() = ById(*id);
  req.mutable_options()->set_rx(4);
  req.mutable_options()->set_ry(2);
  req.set_keep(true);
  req.set_label("blurred");
  req.set_encoding(v1::PIXEL_ENCODING_PNG);
  BoxStream got = ReadBox(stub(), req);
  ASSERT_TRUE(got.status.ok()) << got.status.error_message();
  const std::string blurred = got.header.result().image_id();
  ASSERT_EQ(blurred.size(), 32u);
  EXPECT_NE(blurred, *id);
  EXPECT_EQ(got.header.result().origin(), "box_filter");
  EXPECT_EQ(got.data.substr(1, 3), "PNG");

  gpu::BoxFilterOptions opt;
  opt.rx = 4;
  opt.ry = 2;
  absl::StatusOr<HostImage> ref_box = reference::BoxFilter(img, opt);
  ASSERT_TRUE(ref_box.ok());
  absl::StatusOr<gpu::HistogramResult> ref = reference::Histogram(*ref_box, {});
  ASSERT_TRUE(ref.ok());
  v1::HistogramRequest hreq;
  *hreq.mutable_image() = ById(blurred);
  v1::HistogramResponse hresp;
  ASSERT_TRUE(Histogram(hreq, &hresp).ok());
  ExpectHistogramEquals(hresp, *ref);
  // The PNG the client got decodes (server-side decoder) to the same pixels.
  hreq.mutable_image()->mutable_encoded()->set_data(got.data);
  ASSERT_TRUE(Histogram(hreq, &hresp).ok());
  ExpectHistogramEquals(hresp, *ref);
}

// ---- bad input: the right code, a message naming the field, and the server keeps serving -------

TEST_F(ServiceTest, BadUploadsAreRefusedWithTheirReason) {
  const HostImage img = HostImage::Zeros({10, 10, 3, SampleType::kUint8});
  const std::string png = PngFile(img);
  struct Case {
    std::string name;
    v1::UploadHeader header;
    std::string bytes;
    grpc::StatusCode code;
    std::string needle;
  };
  std::vector<Case> cases;
  auto raw = [](uint32_t w, uint32_t h, uint32_t c, v1::SampleFormat f) {
    v1::UploadHeader hd;
    hd.mutable_raw()->set_width(w);
    hd.mutable_raw()->set_height(h);
    hd.mutable_raw()->set_channels(c);
    hd.mutable_raw()->set_format(f);
    return hd;
  };
  v1::UploadHeader encoded;
  encoded.mutable_encoded();
  cases.push_back({"zero width", raw(0, 5, 1, v1::SAMPLE_FORMAT_UINT8), "",
                   grpc::StatusCode::INVALID_ARGUMENT, "width"});
  cases.push_back({"five channels", raw(2, 2, 5, v1::SAMPLE_FORMAT_UINT8), std::string(20, 'x'),
                   grpc::StatusCode::INVALID_ARGUMENT, "channels"});
  cases.push_back({"no format", raw(2, 2, 1, v1::SAMPLE_FORMAT_UNSPECIFIED), "xxxx",
                   grpc::StatusCode::INVALID_ARGUMENT, "format"});
  cases.push_back({"too few bytes", raw(4, 4, 1, v1::SAMPLE_FORMAT_UINT16), std::string(31, 'x'),
                   grpc::StatusCode::INVALID_ARGUMENT, "needs 32"});
  cases.push_back({"too many bytes", raw(4, 4, 1, v1::SAMPLE_FORMAT_UINT8), std::string(17, 'x'),
                   grpc::StatusCode::INVALID_ARGUMENT, "16"});
  cases.push_back({"over the pixel limit", raw(3000, 2000, 1, v1::SAMPLE_FORMAT_UINT8), "",
                   grpc::StatusCode::RESOURCE_EXHAUSTED, "--max-image-pixels"});
  cases.push_back({"not an image", encoded, "hello, this is text",
                   grpc::StatusCode::INVALID_ARGUMENT, "not an image"});
  cases.push_back({"empty file", encoded, "", grpc::StatusCode::INVALID_ARGUMENT, "empty"});
  cases.push_back({"truncated png", encoded, png.substr(0, png.size() / 2),
                   grpc::StatusCode::INVALID_ARGUMENT, "truncated"});
  std::string corrupt = png;
  for (size_t i = 40; i < corrupt.size() - 12; ++i) corrupt[i] = char(corrupt[i] ^ 0x5a);
  cases.push_back(
      {"corrupt png", encoded, corrupt, grpc::StatusCode::INVALID_ARGUMENT, "uploaded file"});
  // A PNG whose header claims 3000 x 3000 pixels (over this server's 4 MP): refused from the
  // header, nothing decoded.
  std::string bomb = png;
  const unsigned char big[8] = {0, 0, 0x0b, 0xb8, 0, 0, 0x0b, 0xb8};
  std::memcpy(&bomb[16], big, 8);
  cases.push_back({"decompression bomb", encoded, bomb, grpc::StatusCode::RESOURCE_EXHAUSTED,
                   "--max-image-pixels"});
  v1::UploadHeader declared = encoded;
  declared.set_total_bytes(kMaxUpload + 1);
  cases.push_back({"over the upload limit", declared, png, grpc::StatusCode::RESOURCE_EXHAUSTED,
                   "--max-upload-bytes"});
  v1::UploadHeader wrong_total = encoded;
  wrong_total.set_total_bytes(png.size() + 10);
  cases.push_back(
      {"truncated stream", wrong_total, png, grpc::StatusCode::INVALID_ARGUMENT, "total_bytes"});
  v1::UploadHeader channels = encoded;
  channels.mutable_encoded()->set_desired_channels(7);
  cases.push_back({"desired channels", channels, png, grpc::StatusCode::INVALID_ARGUMENT,
                   "encoded.desired_channels must be 0 (the file's own channels) to 4, got 7"});
  v1::UploadHeader orientation = encoded;
  orientation.mutable_encoded()->set_orientation(v1::Orientation(-1));
  cases.push_back({"orientation", orientation, png, grpc::StatusCode::INVALID_ARGUMENT,
                   "encoded.orientation must be ORIENTATION_FROM_FILE (1) or "
                   "ORIENTATION_AS_STORED (2), got -1"});
  const std::string pgm = Pgm16File(HostImage::Zeros({10, 10, 1, SampleType::kUint16}));
  cases.push_back({"truncated pgm", encoded, pgm.substr(0, pgm.size() - 1),
                   grpc::StatusCode::INVALID_ARGUMENT, "truncated"});
  cases.push_back(
      {"no kind", v1::UploadHeader(), png, grpc::StatusCode::INVALID_ARGUMENT, "header"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::UploadImageResponse resp;
    ExpectCode(UploadRaw(stub(), c.header, c.bytes, &resp, 100), c.code, c.needle);
  }

  // A stream with no header, and one with a second header.
  {
    grpc::ClientContext ctx;
    v1::UploadImageResponse resp;
    auto writer = stub().UploadImage(&ctx, &resp);
    v1::UploadImageRequest m;
    m.set_chunk("abc");
    writer->Write(m);
    writer->WritesDone();
    ExpectCode(writer->Finish(), grpc::StatusCode::INVALID_ARGUMENT, "header");
  }
  {
    grpc::ClientContext ctx;
    v1::UploadImageResponse resp;
    auto writer = stub().UploadImage(&ctx, &resp);
    v1::UploadImageRequest m;
    *m.mutable_header() = encoded;
    writer->Write(m);
    writer->Write(m);
    writer->WritesDone();
    ExpectCode(writer->Finish(), grpc::StatusCode::INVALID_ARGUMENT, "first message");
  }
  {
    grpc::ClientContext ctx;
    v1::UploadImageResponse resp;
    auto writer = stub().UploadImage(&ctx, &resp);
    writer->WritesDone();
    ExpectCode(writer->Finish(), grpc::StatusCode::INVALID_ARGUMENT, "had no header");
  }
}

TEST_F(ServiceTest, BadAnalysisRequestsAreRefusedWithTheirReason) {
  HostImage img = HostImage::Zeros({8, 6, 3, SampleType::kUint8});
  absl::StatusOr<std::string> id = UploadImage(stub(), img);
  ASSERT_TRUE(id.ok());
  auto hist = [&](auto edit) {
    v1::HistogramRequest req;
    *req.mutable_image() = ById(*id);
    edit(req);
    v1::HistogramResponse resp;
    return Histogram(req, &resp);
  };
  ExpectCode(hist([](auto& r) { r.mutable_options()->set_bins(70000); }),
             grpc::StatusCode::INVALID_ARGUMENT, "bins");
  ExpectCode(hist([](auto& r) {
               r.mutable_options()->set_source(v1::HISTOGRAM_SOURCE_CHANNEL);
               r.mutable_options()->set_channel(3);
             }),
             grpc::StatusCode::INVALID_ARGUMENT, "channel");
  ExpectCode(hist([](auto& r) { r.mutable_options()->set_source(v1::HistogramSource(99)); }),
             grpc::StatusCode::INVALID_ARGUMENT, "options.source");
  ExpectCode(hist([](auto& r) {
               r.mutable_options()->set_lo(10);
               r.mutable_options()->set_hi(5);
             }),
             grpc::StatusCode::INVALID_ARGUMENT, "lo");
  ExpectCode(hist([](auto& r) { r.set_variant("warp_speed"); }), grpc::StatusCode::INVALID_ARGUMENT,
             "warp_speed");
  ExpectCode(hist([](auto& r) { r.clear_image(); }), grpc::StatusCode::INVALID_ARGUMENT,
             "image must be set");
  ExpectCode(hist([](auto& r) { r.mutable_image()->set_image_id("feedface"); }),
             grpc::StatusCode::NOT_FOUND, "feedface");
  ExpectCode(hist([&](auto& r) {
               *r.mutable_image() = InlineRaw(img);
               r.mutable_image()->mutable_raw()->mutable_layout()->set_height(7);
             }),
             grpc::StatusCode::INVALID_ARGUMENT, "image.raw.data");
  ExpectCode(hist([&](auto& r) {
               *r.mutable_image() = InlineRaw(img);
               r.mutable_image()->mutable_raw()->mutable_layout()->set_width(0);
             }),
             grpc::StatusCode::INVALID_ARGUMENT, "image.raw.layout.width must be in [1, ");
  // Each rule of a layout, from the one owner of image shapes, naming the request's field; a
  // side past int's range is named as sent.
  const int max_side = ts_->server->worker().device().limits.max_texture_size;
  ExpectCode(hist([&](auto& r) {
               *r.mutable_image() = InlineRaw(img);
               r.mutable_image()->mutable_raw()->mutable_layout()->set_channels(5);
             }),
             grpc::StatusCode::INVALID_ARGUMENT,
             "image.raw.layout.channels must be in [1, 4], got 5");
  ExpectCode(
      hist([&](auto& r) {
        *r.mutable_image() = InlineRaw(img);
        r.mutable_image()->mutable_raw()->mutable_layout()->set_height(uint32_t(max_side) + 1);
        r.mutable_image()->mutable_raw()->mutable_layout()->set_width(1);
      }),
      grpc::StatusCode::INVALID_ARGUMENT,
      StrCat("image.raw.layout.height must be in [1, ", max_side,
             "] (the device's texture limit), got ", max_side + 1));
  ExpectCode(hist([](auto& r) { r.mutable_image()->mutable_encoded()->set_data("no image here"); }),
             grpc::StatusCode::INVALID_ARGUMENT, "image.encoded.data");
  // An inline image over the message limit is refused by gRPC itself.
  ExpectCode(hist([](auto& r) {
               r.mutable_image()->mutable_encoded()->set_data(std::string(5 << 20, 'x'));
             }),
             grpc::StatusCode::RESOURCE_EXHAUSTED, "");
  {
    v1::IntegralImageRequest req;
    *req.mutable_image() = ById(*id);
    req.set_variant("bogus");
    IntegralStream got = ReadIntegral(stub(), req);
    ExpectCode(got.status, grpc::StatusCode::INVALID_ARGUMENT, "bogus");
  }
  {
    v1::CompactRequest req;
    *req.mutable_image() = ById(*id);
    req.mutable_options()->set_lo(5);
    req.mutable_options()->set_hi(1);
    ExpectCode(ReadCompact(stub(), req).status, grpc::StatusCode::INVALID_ARGUMENT, "lo");
    req.mutable_options()->set_hi(std::numeric_limits<double>::quiet_NaN());
    ExpectCode(ReadCompact(stub(), req).status, grpc::StatusCode::INVALID_ARGUMENT, "hi");
    req.mutable_options()->set_hi(9);
    req.mutable_options()->set_channel(4);
    ExpectCode(ReadCompact(stub(), req).status, grpc::StatusCode::INVALID_ARGUMENT, "channel");
  }
  {
    v1::BoxFilterRequest req;
    *req.mutable_image() = ById(*id);
    req.set_encoding(v1::PIXEL_ENCODING_RAW);
    req.mutable_options()->set_rx(1u << 30);
    ExpectCode(ReadBox(stub(), req).status, grpc::StatusCode::INVALID_ARGUMENT, "rx");
    req.mutable_options()->set_rx(1);
    req.set_encoding(v1::PIXEL_ENCODING_NONE);
    ExpectCode(ReadBox(stub(), req).status, grpc::StatusCode::INVALID_ARGUMENT, "keep");
    req.set_encoding(v1::PIXEL_ENCODING_PNG);
    *req.mutable_image() = InlineRaw(HostImage::Zeros({4, 4, 1, SampleType::kFloat32}));
    ExpectCode(ReadBox(stub(), req).status, grpc::StatusCode::INVALID_ARGUMENT, "PNG");
  }
}

// ---- staging memory ---------------------------------------------------------------------------

v1::ServerInfo Info(v1::ImageAnalytics::Stub& stub) {
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  EXPECT_TRUE(stub.GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  return info;
}

// Unset, the staging memory is room for one 3840x2160 RGBA image per decoding thread, within
// [128 MiB, 1 GiB], and a server reports what it took.
TEST(StagingServiceTest, DefaultLimitGrowsWithTheDecodingThreads) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  EXPECT_EQ(server::AutoStagingBytes(0), 128 * kMiB);
  EXPECT_EQ(server::AutoStagingBytes(4), 128 * kMiB);
  EXPECT_EQ(server::AutoStagingBytes(5), 160 * kMiB);
  EXPECT_EQ(server::AutoStagingBytes(16), 512 * kMiB);
  EXPECT_EQ(server::AutoStagingBytes(32), 1024 * kMiB);
  EXPECT_EQ(server::AutoStagingBytes(96), 1024 * kMiB);
  EXPECT_GE(uint64_t{32} * kMiB, uint64_t{3840} * 2160 * 4) << "a 3840x2160 RGBA image per thread";
  EXPECT_GE(server::DecoderThreads(), 4);
  std::unique_ptr<TestServer> ts = TestServer::Start(server::ServerOptions{});
  GLIMPSE_REQUIRE_SERVER(ts);
  EXPECT_EQ(Info(*ts->stub).staging_bytes(), server::AutoStagingBytes(server::DecoderThreads()));
}

// Images of over 1 MiB go through staging memory (--staging-bytes), here room for two 1921x1080
// RGB images, mapped once the first large image found none: raw inline, raw by upload stream and
// PNG files, inline and stored, with rows that are not whole 16-byte texels. While the GPU is held,
// six calls' images wait in the queue, so that some find the staging memory full and take ordinary
// memory. Every answer equals the CPU reference, and once the calls are done the staging memory is
// all free again.
TEST(StagingServiceTest, LargeImagesGoThroughStagingMemoryAndPastIt) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  server::ServerOptions o;
  o.limits.max_message_bytes = 16 << 20;
  o.worker.staging_bytes = 13 << 20;
  std::unique_ptr<TestServer> ts = TestServer::Start(o);
  GLIMPSE_REQUIRE_SERVER(ts);
  v1::ImageAnalytics::Stub& stub = *ts->stub;
  EXPECT_EQ(Info(stub).staging_bytes(), uint64_t{13} << 20);
  EXPECT_EQ(Info(stub).staging_mapped_bytes(), 0u) << "staging memory mapped before any image";
  const HostImage images[] = {RandomImage({1921, 1080, 3, SampleType::kUint8}, rng),
                              RandomImage({1200, 901, 1, SampleType::kUint16}, rng),
                              RandomImage({1000, 700, 4, SampleType::kUint8}, rng)};
  const std::string png = PngFile(images[0]);
  std::vector<gpu::HistogramResult> refs;
  for (const HostImage& img : images) {
    absl::StatusOr<gpu::HistogramResult> ref = reference::Histogram(img, {});
    ASSERT_TRUE(ref.ok());
    refs.push_back(*ref);
  }
  // The first large image finds none mapped and goes through ordinary memory; the worker then
  // maps what the limit allows.
  {
    v1::HistogramRequest req;
    *req.mutable_image() = InlineRaw(images[2]);
    v1::HistogramResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub.Histogram(&ctx, req, &resp).ok());
    ExpectHistogramEquals(resp, refs[2]);
    EXPECT_EQ(Info(stub).staging_full(), 1u);
    // (The worker maps it after the job that answered, so just after the answer at times.)
    uint64_t mapped = 0;
    for (int i = 0; i < 500 && mapped == 0; ++i) {
      mapped = Info(stub).staging_mapped_bytes();
      if (mapped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(mapped, uint64_t{13} << 20);
  }
  {
    WorkerBlocker blocker(ts->server->worker());
    std::vector<std::unique_ptr<AsyncHistogram>> calls;
    for (int i = 0; i < 6; ++i) {
      v1::ImageRef ref = InlineRaw(images[size_t(i) % 3]);
      if (i == 3) ref.mutable_encoded()->set_data(png);
      calls.push_back(std::make_unique<AsyncHistogram>(stub, ref));
    }
    // Every image decoded or copied and waiting: staging memory full, the rest in host memory.
    v1::ServerInfo info;
    for (int i = 0; i < 500; ++i) {
      info = Info(stub);
      if (info.queue_length() >= 6) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_EQ(info.queue_length(), 6u);
    EXPECT_GT(info.staging_used_bytes(), uint64_t{6} << 20);
    EXPECT_GT(info.staging_full(), 1u);
    blocker.Release();
    for (int i = 0; i < 6; ++i) {
      SCOPED_TRACE(::testing::Message() << "call " << i);
      const grpc::Status s = calls[size_t(i)]->status.get();
      ASSERT_TRUE(s.ok()) << s.error_message();
      ExpectHistogramEquals(calls[size_t(i)]->resp, refs[size_t(i) % 3]);
    }
  }
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(gpu::DescribeImage(images[i].desc));
    v1::UploadHeader header;
    *header.mutable_raw() = Layout(images[i].desc);
    v1::UploadImageResponse up;
    ASSERT_TRUE(UploadRaw(stub, header, Bytes(images[i]), &up, 1 << 20).ok());
    v1::HistogramRequest req;
    *req.mutable_image() = ById(up.image().image_id());
    v1::HistogramResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub.Histogram(&ctx, req, &resp).ok());
    ExpectHistogramEquals(resp, refs[i]);
  }
  v1::UploadHeader header;
  header.mutable_encoded();
  v1::UploadImageResponse up;
  ASSERT_TRUE(UploadRaw(stub, header, png, &up, 1 << 20).ok());
  v1::HistogramRequest req;
  *req.mutable_image() = ById(up.image().image_id());
  v1::HistogramResponse resp;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub.Histogram(&ctx, req, &resp).ok());
  ExpectHistogramEquals(resp, refs[0]);
  // The worker frees blocks the device has read between jobs, and at least every second.
  uint64_t used = 1;
  for (int i = 0; i < 300 && used != 0; ++i) {
    used = Info(stub).staging_used_bytes();
    if (used != 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(used, 0u) << "staging memory still held once every call was answered";
}

}  // namespace
}  // namespace glimpse::testing
