// Queue, cancellation, deadlines, shutdown and the image store, each on a server of its own with
// small limits. The GPU worker is held busy by a job the test releases, so queue states are
// reached deterministically.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/service/service_test_util.h"

namespace glimpse::testing {
namespace {

using gpu::HostImage;
using gpu::SampleType;
using std::chrono::milliseconds;

void WaitForQueueLength(server::GpuWorker& worker, uint64_t n) {
  for (int i = 0; i < 500 && worker.Stats().queue_length != n; ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(worker.Stats().queue_length, n);
}

TEST(ServiceControlTest, FullQueueAnswersResourceExhaustedAndDropsCancelledAndExpiredJobs) {
  server::ServerOptions o;
  o.worker.max_queue = 2;
  std::unique_ptr<TestServer> ts = TestServer::Start(o);
  GLIMPSE_REQUIRE_SERVER(ts);
  server::GpuWorker& worker = ts->server->worker();
  const HostImage img = HostImage::Zeros({16, 16, 1, SampleType::kUint8});
  {
    // Connect first, so that the expiring call's deadline is not spent on connection set-up.
    grpc::ClientContext ctx;
    v1::ServerInfo info;
    ASSERT_TRUE(ts->stub->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  }
  const server::WorkerStats before = worker.Stats();
  {
    WorkerBlocker blocker(worker);
    auto cancelled = std::make_unique<AsyncHistogram>(*ts->stub, InlineRaw(img));
    auto expiring = std::make_unique<AsyncHistogram>(*ts->stub, InlineRaw(img), milliseconds(1500));
    WaitForQueueLength(worker, 2);

    // The queue is full: refused at once, without waiting for the worker.
    const auto t0 = std::chrono::steady_clock::now();
    grpc::ClientContext ctx;
    v1::HistogramRequest req;
    *req.mutable_image() = InlineRaw(img);
    v1::HistogramResponse resp;
    grpc::Status full = ts->stub->Histogram(&ctx, req, &resp);
    EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << full.error_message();
    EXPECT_NE(full.error_message().find("--max-queue"), std::string::npos);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));

    cancelled->ctx.TryCancel();
    EXPECT_EQ(cancelled->status.get().error_code(), grpc::StatusCode::CANCELLED);
    EXPECT_EQ(expiring->status.get().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    // The server's copy of the deadline is the client's timeout counted from when the call
    // arrived, so it passes a little after the client's: give it that slack before the worker
    // looks at the job, or the job may still be (correctly) in time and run.
    std::this_thread::sleep_for(milliseconds(300));
    blocker.Release();
    // Both jobs leave the queue unrun.
    for (int i = 0; i < 500 && worker.Stats().jobs_dropped < before.jobs_dropped + 2; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
  const server::WorkerStats after = worker.Stats();
  EXPECT_EQ(after.jobs_dropped, before.jobs_dropped + 2);
  EXPECT_EQ(after.jobs_run, before.jobs_run + 1);  // the blocker only
  EXPECT_EQ(after.jobs_rejected, before.jobs_rejected + 1);

  // And the server goes on serving.
  grpc::ClientContext ctx;
  v1::HistogramRequest req;
  *req.mutable_image() = InlineRaw(img);
  v1::HistogramResponse resp;
  ASSERT_TRUE(ts->stub->Histogram(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.total(), 256u);
}

TEST(ServiceControlTest, ShutdownFinishesQueuedCallsThenStops) {
  std::unique_ptr<TestServer> ts = TestServer::Start({});
  GLIMPSE_REQUIRE_SERVER(ts);
  server::GpuWorker& worker = ts->server->worker();
  const HostImage img = HostImage::Zeros({32, 8, 2, SampleType::kUint16});
  auto blocker = std::make_unique<WorkerBlocker>(worker);
  std::vector<std::unique_ptr<AsyncHistogram>> calls;
  for (int i = 0; i < 3; ++i)
    calls.push_back(std::make_unique<AsyncHistogram>(*ts->stub, InlineRaw(img)));
  WaitForQueueLength(worker, 3);

  std::thread shutdown([&] { ts->server->Shutdown(std::chrono::seconds(30)); });
  std::this_thread::sleep_for(milliseconds(200));
  // Shutting down: new calls are refused while the queued ones wait.
  {
    auto health = grpc::health::v1::Health::NewStub(ts->channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(2000));
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status s = health->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &resp);
    EXPECT_TRUE(!s.ok() || resp.status() != grpc::health::v1::HealthCheckResponse::SERVING);
  }
  blocker->Release();
  for (auto& c : calls) {
    grpc::Status s = c->status.get();
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(c->resp.total(), 2u * 32 * 8);
  }
  shutdown.join();
  blocker.reset();
}

TEST(ServiceControlTest, StoreEvictsLeastRecentlyUsedAndExpiresIdleImages) {
  server::ServerOptions o;
  o.worker.store_bytes = 100'000;
  o.worker.image_ttl = std::chrono::seconds(2);
  std::unique_ptr<TestServer> ts = TestServer::Start(o);
  GLIMPSE_REQUIRE_SERVER(ts);
  v1::ImageAnalytics::Stub& stub = *ts->stub;
  // 40000 bytes held either way: two fit the budget, three do not.
  const bool software = ServerIsSoftware(stub);
  const HostImage img = HostImage::Zeros({100, software ? 50 : 100, 4, SampleType::kUint8});
  ASSERT_EQ(StoredBytes(img.desc, software), 40'000u);
  auto info = [&](const std::string& id) {
    grpc::ClientContext ctx;
    v1::GetImageInfoRequest req;
    req.set_image_id(id);
    v1::ImageInfo resp;
    return stub.GetImageInfo(&ctx, req, &resp);
  };
  auto use = [&](const std::string& id) {
    grpc::ClientContext ctx;
    v1::HistogramRequest req;
    *req.mutable_image() = ById(id);
    v1::HistogramResponse resp;
    return stub.Histogram(&ctx, req, &resp);
  };
  absl::StatusOr<std::string> a = UploadImage(stub, img);
  absl::StatusOr<std::string> b = UploadImage(stub, img);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(use(*a).ok());  // b is now the least recently used
  absl::StatusOr<std::string> c = UploadImage(stub, img);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(info(*a).ok());
  EXPECT_EQ(use(*b).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(info(*c).ok());

  // Over the whole budget.
  v1::UploadHeader header;
  *header.mutable_raw() = Layout({200, 200, 4, SampleType::kUint8});
  v1::UploadImageResponse resp;
  grpc::Status s = UploadRaw(stub, header, std::string(160000, '\0'), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("--store-bytes"), std::string::npos) << s.error_message();

  // Idle past the TTL: gone.
  std::this_thread::sleep_for(milliseconds(2500));
  EXPECT_EQ(info(*a).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(use(*c).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext ctx;
  v1::ServerInfo server_info;
  ASSERT_TRUE(stub.GetServerInfo(&ctx, v1::GetServerInfoRequest(), &server_info).ok());
  EXPECT_EQ(server_info.stored_images(), 0u);
  EXPECT_EQ(server_info.images_evicted(), 3u);
}

}  // namespace
}  // namespace glimpse::testing
