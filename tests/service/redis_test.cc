// The shared image store against a real redis-server on a free loopback port and two Glimpse
// servers on it: any replica serves any image with the same results, deletes reach every replica,
// a replica killed with SIGKILL loses no image, a Redis outage gives clear errors, keeps
// cached images serving and heals by itself, and with tokens every replica keeps each tenant to
// its own images, wherever they were stored.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/service/access_test_util.h"
#include "tests/service/analyze_test_util.h"
#include "tests/service/process_util.h"
#include "tests/service/redis_test_util.h"
#include "tests/service/service_test_util.h"

namespace glimpse::testing {
namespace {

using gpu::HostImage;
using gpu::ImageDesc;
using gpu::SampleType;
using std::chrono_literals::operator""ms;

grpc::Status Histogram(v1::ImageAnalytics::Stub& stub, const std::string& id,
                       v1::HistogramResponse* resp) {
  v1::HistogramRequest req;
  *req.mutable_image() = ById(id);
  grpc::ClientContext ctx;
  return stub.Histogram(&ctx, req, resp);
}

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kRedisServer))
        << kRedisServer << " is missing: deploy/install-deps.sh installs redis-server";
    dir_ = ScratchDir("glimpse-redis-test");
    redis_port_ = FreePort();
    ASSERT_NE(redis_port_, 0);
    redis_ = StartRedis(redis_port_, dir_);
    ASSERT_TRUE(Eventually([&] { return RedisAnswers(); })) << "redis-server did not start";
    server::ServerOptions o;
    o.limits.max_image_pixels = 40'000'000;
    o.limits.max_upload_bytes = 256 << 20;
    o.redis.address = "127.0.0.1:" + std::to_string(redis_port_);
    o.redis.timeout = std::chrono::milliseconds(1000);
    a_ = TestServer::Start(o);
    b_ = TestServer::Start(o);
    GLIMPSE_REQUIRE_SERVER(a_);
    GLIMPSE_REQUIRE_SERVER(b_);
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    redis_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  bool RedisAnswers() { return glimpse::testing::RedisAnswers(redis_port_); }

  std::filesystem::path dir_;
  int redis_port_ = 0;
  std::unique_ptr<Child> redis_;
  std::unique_ptr<TestServer> a_, b_;
};

TEST_F(RedisStoreTest, UploadOnOneReplicaEveryAnalysisOnTheOtherGivesTheSameResults) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  // Larger than one 8 MiB chunk, so the image spans several hash fields; and an awkward small one.
  for (const ImageDesc& desc :
       {ImageDesc{1601, 1409, 4, SampleType::kUint8}, ImageDesc{1, 37, 3, SampleType::kUint8},
        ImageDesc{97, 31, 2, SampleType::kUint16}}) {
    SCOPED_TRACE(gpu::DescribeImage(desc));
    const HostImage img = RandomImage(desc, rng);
    absl::StatusOr<std::string> id = UploadImage(*a_->stub, img);
    ASSERT_TRUE(id.ok()) << id.status();
    v1::AnalyzeHeader header;
    *header.mutable_image() = ById(*id);
    AddEveryAnalysis(&header);
    AnalyzeCallResult on_a = CallAnalyze(*a_->stub, header);
    AnalyzeCallResult on_b = CallAnalyze(*b_->stub, header);  // B fetches it from Redis
    ASSERT_TRUE(on_a.status.ok()) << on_a.status.error_message();
    ASSERT_TRUE(on_b.status.ok()) << on_b.status.error_message();
    for (uint32_t i = 0; i < 4; ++i) {
      EXPECT_TRUE(ComparableResult(on_a.messages, i) == ComparableResult(on_b.messages, i))
          << "analysis " << i;
      EXPECT_FALSE(ComparableResult(on_b.messages, i).empty());
    }
    // The single-analysis RPCs on B too, and the image's description.
    v1::HistogramResponse ha, hb;
    ASSERT_TRUE(Histogram(*a_->stub, *id, &ha).ok());
    ASSERT_TRUE(Histogram(*b_->stub, *id, &hb).ok());
    EXPECT_EQ(ha.histograms(0).SerializeAsString(), hb.histograms(0).SerializeAsString());
    grpc::ClientContext ctx;
    v1::GetImageInfoRequest req;
    req.set_image_id(*id);
    v1::ImageInfo info;
    ASSERT_TRUE(b_->stub->GetImageInfo(&ctx, req, &info).ok());
    EXPECT_EQ(info.width(), uint32_t(desc.width));
    EXPECT_EQ(info.origin(), "upload");
  }
  // Both replicas list every image, from Redis.
  for (TestServer* s : {a_.get(), b_.get()}) {
    grpc::ClientContext ctx;
    v1::ListImagesResponse list;
    ASSERT_TRUE(s->stub->ListImages(&ctx, v1::ListImagesRequest(), &list).ok());
    EXPECT_EQ(list.images_size(), 3);
  }
}

TEST_F(RedisStoreTest, KeptResultsAreSharedAndDeletesReachEveryReplica) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 1);
  const HostImage img = RandomImage({64, 48, 3, SampleType::kUint8}, rng);
  absl::StatusOr<std::string> id = UploadImage(*a_->stub, img);
  ASSERT_TRUE(id.ok());
  v1::HistogramResponse r;
  ASSERT_TRUE(Histogram(*a_->stub, *id, &r).ok());
  ASSERT_TRUE(Histogram(*b_->stub, *id, &r).ok());  // now cached on both GPUs

  // A box filter kept on A serves on B at once.
  v1::BoxFilterRequest box;
  *box.mutable_image() = ById(*id);
  box.set_keep(true);
  grpc::ClientContext bctx;
  auto reader = a_->stub->BoxFilter(&bctx, box);
  v1::BoxFilterResponse m;
  std::string kept;
  while (reader->Read(&m)) {
    if (m.has_header()) kept = m.header().result().image_id();
  }
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_FALSE(kept.empty());
  EXPECT_TRUE(Histogram(*b_->stub, kept, &r).ok());
  // So does an image kept by Analyze.
  v1::AnalyzeHeader header;
  *header.mutable_image() = InlineRaw(img);
  header.set_keep(true);
  header.add_analyses()->mutable_histogram();
  AnalyzeCallResult an = CallAnalyze(*a_->stub, header);
  ASSERT_TRUE(an.status.ok()) << an.status.error_message();
  ASSERT_TRUE(an.messages[0].has_kept());
  EXPECT_TRUE(Histogram(*b_->stub, an.messages[0].kept().image_id(), &r).ok());

  // Deleted on B: gone on A, though A still had it on its GPU.
  grpc::ClientContext dctx;
  v1::DeleteImageRequest del;
  del.set_image_id(*id);
  v1::DeleteImageResponse dresp;
  ASSERT_TRUE(b_->stub->DeleteImage(&dctx, del, &dresp).ok());
  grpc::Status s = Histogram(*a_->stub, *id, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  grpc::ClientContext ictx;
  v1::GetImageInfoRequest ireq;
  ireq.set_image_id(*id);
  v1::ImageInfo info;
  EXPECT_EQ(a_->stub->GetImageInfo(&ictx, ireq, &info).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext d2;
  EXPECT_EQ(a_->stub->DeleteImage(&d2, del, &dresp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(RedisStoreTest, RedisOutageGivesClearErrorsKeepsCachedImagesAndHealsByItself) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 2);
  const HostImage img = RandomImage({50, 40, 4, SampleType::kUint8}, rng);
  absl::StatusOr<std::string> cached = UploadImage(*a_->stub, img);
  absl::StatusOr<std::string> uncached = UploadImage(*a_->stub, img);
  absl::StatusOr<std::string> slow_id = UploadImage(*a_->stub, img);
  ASSERT_TRUE(cached.ok() && uncached.ok() && slow_id.ok());
  v1::HistogramResponse before, r;
  ASSERT_TRUE(Histogram(*b_->stub, *cached, &before).ok());
  EXPECT_TRUE(Serving(b_->channel, "glimpse.v1.ImageStore"));

  const std::string address = "Redis at 127.0.0.1:" + std::to_string(redis_port_);
  // A Redis that stops answering (stopped, not gone): UNAVAILABLE after the timeout, not a hang.
  redis_->Signal(SIGSTOP);
  const auto t0 = std::chrono::steady_clock::now();
  grpc::Status slow = Histogram(*b_->stub, *slow_id, &r);
  const auto waited = std::chrono::steady_clock::now() - t0;
  redis_->Signal(SIGCONT);
  EXPECT_EQ(slow.error_code(), grpc::StatusCode::UNAVAILABLE) << slow.error_message();
  EXPECT_NE(slow.error_message().find(address), std::string::npos) << slow.error_message();
  EXPECT_LT(waited, std::chrono::seconds(5));
  // Answers again once Redis does.
  EXPECT_TRUE(Eventually([&] { return Histogram(*b_->stub, *slow_id, &r).ok(); }));

  redis_->Stop(SIGKILL);
  // The store's health turns NOT_SERVING; the service's stays SERVING (no pod restart).
  EXPECT_TRUE(Eventually([&] { return !Serving(b_->channel, "glimpse.v1.ImageStore"); }));
  EXPECT_TRUE(Serving(b_->channel, "glimpse.v1.ImageAnalytics"));
  EXPECT_TRUE(Serving(b_->channel, ""));
  // Cached images still serve, with the same result.
  grpc::Status s = Histogram(*b_->stub, *cached, &r);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(r.histograms(0).SerializeAsString(), before.histograms(0).SerializeAsString());
  // What needs Redis answers UNAVAILABLE naming it and its address.
  s = Histogram(*b_->stub, *uncached, &r);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find(address), std::string::npos) << s.error_message();
  v1::UploadHeader header;
  *header.mutable_raw() = Layout(img.desc);
  v1::UploadImageResponse up;
  s = UploadRaw(*a_->stub, header, Bytes(img), &up);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find(address), std::string::npos) << s.error_message();
  grpc::ClientContext lctx;
  v1::ListImagesResponse list;
  s = a_->stub->ListImages(&lctx, v1::ListImagesRequest(), &list);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  // Calls that need no stored image are unaffected.
  v1::HistogramRequest inline_req;
  *inline_req.mutable_image() = InlineRaw(img);
  grpc::ClientContext hctx;
  EXPECT_TRUE(a_->stub->Histogram(&hctx, inline_req, &r).ok());

  // Redis back (empty: no persistence): the servers recover without a restart.
  redis_ = StartRedis(redis_port_, dir_);
  ASSERT_TRUE(Eventually([&] { return RedisAnswers(); }));
  EXPECT_TRUE(Eventually([&] { return Serving(b_->channel, "glimpse.v1.ImageStore"); }));
  absl::StatusOr<std::string> fresh = UploadImage(*a_->stub, img);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_TRUE(Histogram(*b_->stub, *fresh, &r).ok());
  // The images Redis lost are gone everywhere, cached copies included: one truth.
  EXPECT_EQ(Histogram(*b_->stub, *cached, &r).error_code(), grpc::StatusCode::NOT_FOUND);
}

// Two server processes: A is killed with SIGKILL (no shutdown of any kind), B serves its images.
TEST_F(RedisStoreTest, ReplicaKilledWithSigkillLosesNoImage) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 3);
  const int pa = FreePort(), pb = FreePort();
  const std::string redis = "--redis=127.0.0.1:" + std::to_string(redis_port_);
  Child a({GLIMPSE_SERVER_BINARY, "--listen=127.0.0.1:" + std::to_string(pa), redis, "--warm-up=0"},
          (dir_ / "a.log").string());
  Child b({GLIMPSE_SERVER_BINARY, "--listen=127.0.0.1:" + std::to_string(pb), redis, "--warm-up=0"},
          (dir_ / "b.log").string());
  const std::string ta = "127.0.0.1:" + std::to_string(pa), tb = "127.0.0.1:" + std::to_string(pb);
  ASSERT_TRUE(ServesWithin(a, ta))
      << "replica A did not start (" << a.Describe() << "): " << FileText(dir_ / "a.log");
  ASSERT_TRUE(ServesWithin(b, tb))
      << "replica B did not start (" << b.Describe() << "): " << FileText(dir_ / "b.log");
  auto ca = grpc::CreateChannel(ta, grpc::InsecureChannelCredentials());
  auto cb = grpc::CreateChannel(tb, grpc::InsecureChannelCredentials());
  auto sa = v1::ImageAnalytics::NewStub(ca);
  auto sb = v1::ImageAnalytics::NewStub(cb);
  std::vector<std::pair<std::string, v1::HistogramResponse>> images;
  for (int i = 0; i < 3; ++i) {
    const HostImage img = RandomImage({31 + i, 17, 3, SampleType::kUint8}, rng);
    absl::StatusOr<std::string> id = UploadImage(*sa, img);
    ASSERT_TRUE(id.ok()) << id.status();
    v1::HistogramResponse r;
    ASSERT_TRUE(Histogram(*sa, *id, &r).ok());
    images.emplace_back(*id, r);
  }
  a.Stop(SIGKILL);
  for (const auto& [id, on_a] : images) {
    v1::HistogramResponse r;
    grpc::Status s = Histogram(*sb, id, &r);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(r.histograms(0).SerializeAsString(), on_a.histograms(0).SerializeAsString());
  }
  b.Stop(SIGTERM);
}

// The owner travels with the image in the shared store: each replica keeps tenants to their own
// images whichever replica stored them, whether it holds them in its GPU cache or not.
TEST_F(RedisStoreTest, EveryReplicaEnforcesTenancyOnImagesAnotherStored) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 7);
  const std::string alice_token = RandomToken(rng), bob_token = RandomToken(rng);
  const std::string tokens = (dir_ / "tokens").string();
  std::ofstream(tokens) << "alice " << alice_token << "\nbob " << bob_token << "\n";
  server::ServerOptions o;
  o.redis.address = "127.0.0.1:" + std::to_string(redis_port_);
  o.redis.timeout = std::chrono::milliseconds(1000);
  o.tokens_file = tokens;
  std::unique_ptr<TestServer> c = TestServer::Start(o), d = TestServer::Start(o);
  GLIMPSE_REQUIRE_SERVER(c);
  GLIMPSE_REQUIRE_SERVER(d);
  auto stub = [](const TestServer& t, const std::string& token) {
    return StubWith("127.0.0.1:" + std::to_string(t.server->port()), "Bearer " + token);
  };
  auto alice_c = stub(*c, alice_token), alice_d = stub(*d, alice_token);
  auto bob_c = stub(*c, bob_token), bob_d = stub(*d, bob_token);
  auto info = [](v1::ImageAnalytics::Stub& s, const std::string& id) {
    grpc::ClientContext ctx;
    v1::GetImageInfoRequest req;
    req.set_image_id(id);
    v1::ImageInfo i;
    return s.GetImageInfo(&ctx, req, &i).error_code();
  };
  auto erase = [](v1::ImageAnalytics::Stub& s, const std::string& id) {
    grpc::ClientContext ctx;
    v1::DeleteImageRequest req;
    req.set_image_id(id);
    v1::DeleteImageResponse r;
    return s.DeleteImage(&ctx, req, &r).error_code();
  };
  auto listed = [](v1::ImageAnalytics::Stub& s) {
    grpc::ClientContext ctx;
    v1::ListImagesResponse r;
    EXPECT_TRUE(s.ListImages(&ctx, v1::ListImagesRequest(), &r).ok());
    std::vector<std::string> ids;
    for (const v1::ImageInfo& i : r.images()) ids.push_back(i.image_id());
    return ids;
  };
  const HostImage img = RandomImage({40, 30, 3, SampleType::kUint8}, rng);
  absl::StatusOr<std::string> id = UploadImage(*alice_c, img);
  ASSERT_TRUE(id.ok()) << id.status();
  v1::HistogramResponse r;
  // Bob, on the replica that has not fetched it yet, then on both once each holds it.
  EXPECT_EQ(Histogram(*bob_d, *id, &r).error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(Histogram(*alice_d, *id, &r).ok());
  for (v1::ImageAnalytics::Stub* bob : {bob_c.get(), bob_d.get()}) {
    EXPECT_EQ(Histogram(*bob, *id, &r).error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(info(*bob, *id), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(erase(*bob, *id), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(listed(*bob).empty());
    v1::AnalyzeHeader header;
    *header.mutable_image() = ById(*id);
    header.add_analyses()->mutable_histogram();
    EXPECT_EQ(CallAnalyze(*bob, header).status.error_code(), grpc::StatusCode::NOT_FOUND);
  }
  // Bob's attempts changed nothing; the replicas without tokens (every caller the one tenant
  // "") see none of it either.
  EXPECT_EQ(listed(*alice_c), std::vector<std::string>{*id});
  EXPECT_EQ(listed(*alice_d), std::vector<std::string>{*id});
  EXPECT_EQ(Histogram(*a_->stub, *id, &r).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(listed(*a_->stub).empty());

  // A result alice keeps on D is hers on C too.
  v1::BoxFilterRequest box;
  *box.mutable_image() = ById(*id);
  box.set_keep(true);
  grpc::ClientContext bctx;
  auto reader = alice_d->BoxFilter(&bctx, box);
  v1::BoxFilterResponse m;
  std::string kept;
  while (reader->Read(&m)) {
    if (m.has_header()) kept = m.header().result().image_id();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(info(*alice_c, kept), grpc::StatusCode::OK);
  EXPECT_EQ(info(*bob_c, kept), grpc::StatusCode::NOT_FOUND);
  // Deleted by alice on D: gone for her on C, which held it on its GPU.
  EXPECT_EQ(erase(*alice_d, *id), grpc::StatusCode::OK);
  EXPECT_EQ(Histogram(*alice_c, *id, &r).error_code(), grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace glimpse::testing
