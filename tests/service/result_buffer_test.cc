// The result buffer (--result-buffer-bytes): a reader that stops reading delays only itself, a
// reader that cancels gives its share back at once, and many large streams share the budget.
// Integral tables here are larger than the budget, so they are produced in parts.
#include <gtest/gtest.h>

#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "gpu/reference/integral_image.h"
#include "tests/service/process_util.h"
#include "tests/service/service_test_util.h"

namespace glimpse::testing {
namespace {

using gpu::HostImage;
using gpu::SampleType;
using std::chrono::milliseconds;

constexpr uint64_t kBudget = uint64_t{8} << 20;  // parts of 1 MiB

class ResultBufferTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server::ServerOptions o;
    o.worker.result_buffer_bytes = kBudget;
    ts_ = TestServer::Start(o).release();
  }
  static void TearDownTestSuite() {
    delete ts_;
    ts_ = nullptr;
  }
  void SetUp() override { GLIMPSE_REQUIRE_SERVER(ts_); }
  void TearDown() override {
    if (ts_ == nullptr || ts_->server == nullptr) return;
    // Whatever happened, the budget was never overdrawn and every share has come back.
    v1::ServerInfo info = Info();
    EXPECT_EQ(info.result_buffer_bytes(), kBudget);
    EXPECT_LE(info.result_buffer_peak_bytes(), kBudget);
    for (int i = 0; i < 200 && Info().result_buffer_used_bytes() != 0; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    EXPECT_EQ(Info().result_buffer_used_bytes(), 0u);
  }

  static v1::ServerInfo Info() {
    grpc::ClientContext ctx;
    v1::ServerInfo info;
    EXPECT_TRUE(ts_->stub->GetServerInfo(&ctx, {}, &info).ok());
    return info;
  }

  static TestServer* ts_;
};
TestServer* ResultBufferTest::ts_ = nullptr;

// Reads a whole integral stream: the sum and squared tables, in order.
grpc::Status ReadIntegral(v1::ImageAnalytics::Stub& stub, const v1::IntegralImageRequest& req,
                          std::string* sum, std::string* squared) {
  grpc::ClientContext ctx;
  auto reader = stub.IntegralImage(&ctx, req);
  v1::IntegralImageResponse m;
  uint32_t next_row[2] = {0, 0};
  while (reader->Read(&m)) {
    if (!m.has_chunk()) continue;
    const bool sq = m.chunk().squared();
    EXPECT_EQ(m.chunk().y0(), next_row[sq]);
    next_row[sq] += m.chunk().rows();
    (sq ? *squared : *sum) += m.chunk().data();
  }
  return reader->Finish();
}

// A stalled reader of a table 8 times the budget; another client's histograms all succeed.
TEST_F(ResultBufferTest, StalledReaderDelaysOnlyItself) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  HostImage big = RandomImage({1024, 1024, 4, SampleType::kUint8}, rng);
  absl::StatusOr<std::string> id = UploadImage(*ts_->stub, big);
  ASSERT_TRUE(id.ok());

  grpc::ClientContext stalled_ctx;
  v1::IntegralImageRequest req;
  *req.mutable_image() = ById(*id);
  req.mutable_options()->set_squared(true);  // 2 x 32 MiB
  auto stalled = ts_->stub->IntegralImage(&stalled_ctx, req);
  v1::IntegralImageResponse first;
  ASSERT_TRUE(stalled->Read(&first));
  ASSERT_TRUE(first.has_header());
  // ... and reads no more.

  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(ts_->server->port()),
                                     grpc::InsecureChannelCredentials());
  auto other = v1::ImageAnalytics::NewStub(channel);
  HostImage small = RandomImage({64, 64, 1, SampleType::kUint8}, rng);
  for (int i = 0; i < 20; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::HistogramRequest h;
    *h.mutable_image() = InlineRaw(small);
    v1::HistogramResponse resp;
    grpc::Status s = other->Histogram(&ctx, h, &resp);
    ASSERT_TRUE(s.ok()) << "call " << i << ": " << s.error_message();
    EXPECT_EQ(resp.total(), 64u * 64u);
  }
  // The stalled stream holds at most one part.
  EXPECT_LE(Info().result_buffer_used_bytes(), kBudget / 8 + 8192);
  stalled_ctx.TryCancel();
  EXPECT_EQ(stalled->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

// A reader that cancels mid-stream gives its share back; the next stream is complete and exact.
TEST_F(ResultBufferTest, ReaderCancellingMidStreamFreesItsShare) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  HostImage img = RandomImage({700, 601, 3, SampleType::kUint16}, rng);
  absl::StatusOr<std::string> id = UploadImage(*ts_->stub, img);
  ASSERT_TRUE(id.ok());
  v1::IntegralImageRequest req;
  *req.mutable_image() = ById(*id);
  req.mutable_options()->set_squared(true);
  {
    grpc::ClientContext ctx;
    auto reader = ts_->stub->IntegralImage(&ctx, req);
    v1::IntegralImageResponse m;
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(reader->Read(&m));
    ctx.TryCancel();
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // The client's Finish returns before the server has seen the cancel: a part queued meanwhile
  // may still lease its bytes, run, and give them back once it finds the reader gone. So the
  // buffer is empty at some point here, and for good once the next call has been served.
  EXPECT_TRUE(Eventually([&] { return Info().result_buffer_used_bytes() == 0; }));

  gpu::IntegralImageOptions opt;
  opt.squared = true;
  absl::StatusOr<gpu::IntegralTables> ref = reference::IntegralImage(img, opt);
  ASSERT_TRUE(ref.ok());
  std::string sum, squared;
  grpc::Status s = ReadIntegral(*ts_->stub, req, &sum, &squared);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(sum == AsBytes(ref->sum_u));
  EXPECT_TRUE(squared == AsBytes(ref->sq_u));
  EXPECT_TRUE(Eventually([&] { return Info().result_buffer_used_bytes() == 0; }));
}

// Eight readers of tables larger than the budget each get their exact table.
TEST_F(ResultBufferTest, ManyConcurrentLargeStreamsShareTheBudget) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  HostImage img = RandomImage({521, 509, 4, SampleType::kUint8}, rng);  // 8.1 MiB per table
  absl::StatusOr<std::string> id = UploadImage(*ts_->stub, img);
  ASSERT_TRUE(id.ok());
  absl::StatusOr<gpu::IntegralTables> ref = reference::IntegralImage(img, {});
  ASSERT_TRUE(ref.ok());
  const std::string expected = AsBytes(ref->sum_u);
  v1::IntegralImageRequest req;
  *req.mutable_image() = ById(*id);
  std::vector<std::future<std::pair<grpc::Status, bool>>> results;
  for (int i = 0; i < 8; ++i) {
    results.push_back(std::async(std::launch::async, [&] {
      std::string sum, squared;
      grpc::Status s = ReadIntegral(*ts_->stub, req, &sum, &squared);
      return std::make_pair(s, sum == expected && squared.empty());
    }));
  }
  for (auto& f : results) {
    auto [s, equal] = f.get();
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(equal);
  }
}

// A result that cannot fit in the whole budget is refused, naming the flag.
TEST_F(ResultBufferTest, ResultLargerThanTheBudgetIsRefusedNamingTheFlag) {
  HostImage img = HostImage::Zeros({1024, 2100, 4, SampleType::kUint8});  // 8.2 MiB of pixels
  absl::StatusOr<std::string> id = UploadImage(*ts_->stub, img);
  ASSERT_TRUE(id.ok());
  v1::BoxFilterRequest req;
  *req.mutable_image() = ById(*id);
  req.set_encoding(v1::PIXEL_ENCODING_RAW);
  grpc::ClientContext ctx;
  auto reader = ts_->stub->BoxFilter(&ctx, req);
  v1::BoxFilterResponse m;
  while (reader->Read(&m)) {
  }
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("--result-buffer-bytes"), std::string::npos)
      << s.error_message();
}

// Reads the integral tables (both) of `img` from `ts` and checks them against the reference's
// byte for byte.
void ExpectTablesEqualReference(TestServer& ts, const HostImage& img) {
  SCOPED_TRACE(gpu::DescribeImage(img.desc));
  absl::StatusOr<std::string> id = UploadImage(*ts.stub, img);
  ASSERT_TRUE(id.ok());
  absl::StatusOr<gpu::IntegralTables> ref = reference::IntegralImage(img, {.squared = true});
  ASSERT_TRUE(ref.ok());
  v1::IntegralImageRequest req;
  *req.mutable_image() = ById(*id);
  req.mutable_options()->set_squared(true);
  std::string sum, squared;
  grpc::Status s = ReadIntegral(*ts.stub, req, &sum, &squared);
  ASSERT_TRUE(s.ok()) << s.error_message();
  const bool f = img.desc.type == SampleType::kFloat32;
  EXPECT_TRUE(sum == (f ? AsBytes(ref->sum_f) : AsBytes(ref->sum_u)));
  EXPECT_TRUE(squared == (f ? AsBytes(ref->sq_f) : AsBytes(ref->sq_u)));
}

// Parts of several chunks each (a budget whose eighth holds more than one 1 MiB chunk): every
// chunk of a part gets the carry from the parts above, not from the chunk before it. Each part
// starts from the row above it; a float table from its double row, here of integer samples, so
// that every sum is exact in double and the tables equal the reference's bit for bit.
TEST(ResultBufferPartsTest, PartsOfSeveralChunksAreExact) {
  server::ServerOptions o;
  o.worker.result_buffer_bytes = 24 << 20;  // parts of 3 MiB: three 1 MiB chunks
  std::unique_ptr<TestServer> ts = TestServer::Start(o);
  GLIMPSE_REQUIRE_SERVER(ts);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  for (const gpu::ImageDesc& desc : {gpu::ImageDesc{1024, 1500, 1, SampleType::kUint8},
                                     gpu::ImageDesc{333, 1201, 3, SampleType::kUint16}}) {
    ExpectTablesEqualReference(*ts, RandomImage(desc, rng));
  }
  HostImage floats = HostImage::Zeros({517, 700, 2, SampleType::kFloat32});  // 5.8 MB per table
  std::uniform_int_distribution<int> sample(-1000, 1000);
  for (size_t i = 0; i < floats.data.size(); i += 4) {
    const float v = float(sample(rng));
    std::memcpy(&floats.data[i], &v, 4);
  }
  ExpectTablesEqualReference(*ts, floats);
}

}  // namespace
}  // namespace glimpse::testing
