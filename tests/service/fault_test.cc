// Faults: clients that go away mid-upload and mid-stream, deadlines that pass mid-stream, many
// clients cancelling at once, a server killed with SIGKILL mid-upload and restarted, and an image
// deleted or evicted while a call on it waits in the queue. After each, nothing is left behind
// (stored images, result buffer, queue: GetServerInfo) and the server serves the next call.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <random>
#include <thread>

#include "tests/service/process_util.h"
#include "tests/service/service_test_util.h"

namespace glimpse::testing {
namespace {

using gpu::HostImage;
using gpu::SampleType;
using std::chrono::milliseconds;

constexpr uint64_t kBudget = 4 << 20;  // result buffer: tables of a few MiB come in parts

v1::ServerInfo Info(v1::ImageAnalytics::Stub& stub) {
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  EXPECT_TRUE(stub.GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  return info;
}

// Nothing held: no stored image, no result bytes, no queued job.
bool Idle(v1::ImageAnalytics::Stub& stub) {
  const v1::ServerInfo i = Info(stub);
  return i.stored_images() == 0 && i.stored_bytes() == 0 && i.result_buffer_used_bytes() == 0 &&
         i.queue_length() == 0 && i.jobs_waiting_for_results() == 0;
}

grpc::Status Delete(v1::ImageAnalytics::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  v1::DeleteImageRequest req;
  req.set_image_id(id);
  v1::DeleteImageResponse resp;
  return stub.DeleteImage(&ctx, req, &resp);
}

// The server still answers a whole call exactly.
void ExpectServes(v1::ImageAnalytics::Stub& stub, std::mt19937_64& rng) {
  const HostImage img = RandomImage({37, 23, 1, SampleType::kUint8}, rng);
  grpc::ClientContext ctx;
  v1::HistogramRequest req;
  *req.mutable_image() = InlineRaw(img);
  v1::HistogramResponse resp;
  grpc::Status s = stub.Histogram(&ctx, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.total(), 37u * 23u);
}

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions o;
    o.worker.result_buffer_bytes = kBudget;
    ts_ = TestServer::Start(o);
    GLIMPSE_REQUIRE_SERVER(ts_);
  }
  v1::ImageAnalytics::Stub& stub() { return *ts_->stub; }
  server::GpuWorker& worker() { return ts_->server->worker(); }
  std::unique_ptr<TestServer> ts_;
};

// An upload the client cancels is not decoded, queued or stored, whether it stopped half-way or
// sent every byte without ending the stream; the same for Analyze's upload.
TEST_F(FaultTest, UploadCancelledMidStreamStoresNothing) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  const HostImage img = RandomImage({301, 211, 4, SampleType::kUint8}, rng);
  const std::string bytes = Bytes(img);
  v1::UploadHeader header;
  *header.mutable_raw() = Layout(img.desc);
  header.set_total_bytes(bytes.size());
  const server::WorkerStats before = worker().Stats();
  for (const size_t sent : {size_t{64} << 10, bytes.size()}) {
    SCOPED_TRACE(sent);
    grpc::ClientContext ctx;
    v1::UploadImageResponse resp;
    auto writer = stub().UploadImage(&ctx, &resp);
    v1::UploadImageRequest m;
    *m.mutable_header() = header;
    m.set_chunk(bytes.substr(0, sent));
    ASSERT_TRUE(writer->Write(m));
    std::this_thread::sleep_for(milliseconds(200));  // the server has the bytes
    ctx.TryCancel();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  {
    grpc::ClientContext ctx;
    auto stream = stub().Analyze(&ctx);
    v1::AnalyzeRequest m;
    *m.mutable_header()->mutable_upload() = header;
    m.mutable_header()->add_analyses()->mutable_histogram();
    m.set_chunk(bytes);
    ASSERT_TRUE(stream->Write(m));
    std::this_thread::sleep_for(milliseconds(200));
    ctx.TryCancel();
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  std::this_thread::sleep_for(milliseconds(300));
  const server::WorkerStats after = worker().Stats();
  EXPECT_EQ(after.jobs_run, before.jobs_run) << "a cancelled upload reached the GPU";
  EXPECT_EQ(after.jobs_dropped, before.jobs_dropped) << "a cancelled upload was queued";
  EXPECT_TRUE(Idle(stub()));
  absl::StatusOr<std::string> id = UploadImage(stub(), img);
  ASSERT_TRUE(id.ok()) << id.status();
  ExpectServes(stub(), rng);
}

// A reader whose deadline passes mid-stream, while it has stopped reading, ends with
// DEADLINE_EXCEEDED; its part of the result buffer comes back and others are served meanwhile.
TEST_F(FaultTest, DeadlinePassingMidStreamReleasesTheResultBuffer) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  const HostImage img = RandomImage({700, 601, 3, SampleType::kUint16}, rng);  // 20 MB of tables
  absl::StatusOr<std::string> id = UploadImage(stub(), img);
  ASSERT_TRUE(id.ok()) << id.status();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  v1::IntegralImageRequest req;
  *req.mutable_image() = ById(*id);
  req.mutable_options()->set_squared(true);
  auto reader = stub().IntegralImage(&ctx, req);
  v1::IntegralImageResponse m;
  ASSERT_TRUE(reader->Read(&m));
  ExpectServes(stub(), rng);  // while the stalled stream holds its part
  std::this_thread::sleep_for(std::chrono::seconds(4));
  while (reader->Read(&m)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  ASSERT_TRUE(Delete(stub(), *id).ok());
  EXPECT_TRUE(Eventually([&] { return Idle(stub()); }));
  ExpectServes(stub(), rng);
}

// A client process killed (SIGKILL: its connection drops) while a table streams to it, stalled
// because it cannot write what it received: its part of the result buffer comes back, the parts
// still to be made are not made, and others are served.
TEST_F(FaultTest, ClientKilledMidStreamReleasesTheResultBuffer) {
#ifndef GLIMPSE_CLI_BINARY
  GTEST_SKIP() << "built without the glimpse CLI";
#else
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  const HostImage img = RandomImage({700, 601, 3, SampleType::kUint16}, rng);  // 20 MB of tables
  absl::StatusOr<std::string> id = UploadImage(stub(), img);
  ASSERT_TRUE(id.ok()) << id.status();
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("glimpse-fault-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  // The client writes the table into a pipe nobody reads: it stops reading the stream once the
  // pipe is full, with most of the table still to come.
  const std::string fifo = (dir / "table.npy").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const int read_end = open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(read_end, 0);
  const uint64_t run_before = worker().Stats().jobs_run;
  {
    Child client({GLIMPSE_CLI_BINARY, "--server=127.0.0.1:" + std::to_string(ts_->server->port()),
                  "integral_image", *id, "--squared", "--npy=" + fifo,
                  "--squared-npy=" + (dir / "squared.npy").string()},
                 (dir / "client.log").string());
    ASSERT_TRUE(Eventually([&] { return Info(stub()).result_buffer_used_bytes() > 0; }));
    std::this_thread::sleep_for(milliseconds(500));
    EXPECT_TRUE(client.running()) << "the client finished: the stream did not stall";
    client.Stop(SIGKILL);
  }
  EXPECT_TRUE(Eventually([&] {
    const v1::ServerInfo i = Info(stub());
    return i.result_buffer_used_bytes() == 0 && i.queue_length() == 0;
  }));
  // No part is made after the client has gone, and not all were made before: 20 MB of tables
  // in parts of at most 512 KiB (an eighth of the budget) take at least 40.
  const uint64_t made = worker().Stats().jobs_run - run_before;
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(worker().Stats().jobs_run - run_before, made);
  EXPECT_LT(made, 40u);
  close(read_end);
  std::filesystem::remove_all(dir);
  ExpectServes(stub(), rng);
  ASSERT_TRUE(Delete(stub(), *id).ok());
  EXPECT_TRUE(Eventually([&] { return Idle(stub()); }));
#endif
}

// 32 clients with streams queued, running and half-read all cancel at once: the queue drains and
// every byte of the result buffer comes back.
TEST_F(FaultTest, ThirtyTwoClientsCancellingAtOnceLeaveNothingBehind) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  const HostImage a = RandomImage({640, 480, 4, SampleType::kUint8}, rng);
  const HostImage b = RandomImage({333, 517, 1, SampleType::kUint16}, rng);
  absl::StatusOr<std::string> ida = UploadImage(stub(), a);
  absl::StatusOr<std::string> idb = UploadImage(stub(), b);
  ASSERT_TRUE(ida.ok() && idb.ok());
  constexpr int kClients = 32;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::function<grpc::Status()>> finish;
  for (int i = 0; i < kClients; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    grpc::ClientContext* ctx = contexts.back().get();
    const std::string& id = i % 2 == 0 ? *ida : *idb;
    // The first few are read in part, so some are mid-stream when the others are still queued.
    const bool read_one = i < 4;
    switch (i % 3) {
      case 0: {
        v1::IntegralImageRequest r;
        *r.mutable_image() = ById(id);
        r.mutable_options()->set_squared(true);
        auto reader = std::shared_ptr(stub().IntegralImage(ctx, r));
        v1::IntegralImageResponse m;
        if (read_one && !reader->Read(&m)) FAIL() << i << ": " << reader->Finish().error_message();
        finish.push_back([reader] { return reader->Finish(); });
        break;
      }
      case 1: {
        v1::BoxFilterRequest r;
        *r.mutable_image() = ById(id);
        r.mutable_options()->set_rx(3);
        r.set_encoding(v1::PIXEL_ENCODING_RAW);
        auto reader = std::shared_ptr(stub().BoxFilter(ctx, r));
        v1::BoxFilterResponse m;
        if (read_one && !reader->Read(&m)) FAIL() << i << ": " << reader->Finish().error_message();
        finish.push_back([reader] { return reader->Finish(); });
        break;
      }
      default: {
        v1::CompactRequest r;
        *r.mutable_image() = ById(id);
        r.mutable_options()->set_lo(0);
        r.mutable_options()->set_hi(100);
        r.mutable_options()->set_max_results(10000);
        auto reader = std::shared_ptr(stub().Compact(ctx, r));
        v1::CompactResponse m;
        if (read_one && !reader->Read(&m)) FAIL() << i << ": " << reader->Finish().error_message();
        finish.push_back([reader] { return reader->Finish(); });
        break;
      }
    }
  }
  for (auto& ctx : contexts) ctx->TryCancel();
  int cancelled = 0;
  for (auto& f : finish) {
    const grpc::Status s = f();
    // A call whose whole result was written before the cancel may still end OK.
    EXPECT_TRUE(s.error_code() == grpc::StatusCode::CANCELLED || s.ok()) << s.error_message();
    cancelled += s.error_code() == grpc::StatusCode::CANCELLED;
  }
  EXPECT_GT(cancelled, kClients / 2);
  ASSERT_TRUE(Delete(stub(), *ida).ok());
  ASSERT_TRUE(Delete(stub(), *idb).ok());
  EXPECT_TRUE(Eventually([&] { return Idle(stub()); }))
      << "queue " << Info(stub()).queue_length() << ", result bytes "
      << Info(stub()).result_buffer_used_bytes() << ", stored " << Info(stub()).stored_bytes();
  ExpectServes(stub(), rng);
}

// The design: a call holds an image id, not the image. A call on an image deleted or evicted
// before its job runs answers NOT_FOUND; so does a table made in parts whose image goes between
// parts (after the parts already sent).
TEST_F(FaultTest, ImageDeletedOrEvictedWhileItsCallIsQueuedAnswersNotFound) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  const HostImage img = RandomImage({211, 97, 4, SampleType::kUint8}, rng);
  {  // deleted
    absl::StatusOr<std::string> id = UploadImage(stub(), img);
    ASSERT_TRUE(id.ok());
    WorkerBlocker blocker(worker());
    auto call = std::make_unique<AsyncHistogram>(stub(), ById(*id));
    for (int i = 0; i < 500 && worker().Stats().queue_length != 1; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    ASSERT_EQ(worker().Stats().queue_length, 1u);
    ASSERT_TRUE(Delete(stub(), *id).ok());
    blocker.Release();
    const grpc::Status s = call->status.get();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
    EXPECT_NE(s.error_message().find(*id), std::string::npos) << s.error_message();
  }
  {  // made in parts, deleted after the first
    const HostImage big = RandomImage({700, 601, 3, SampleType::kUint16}, rng);
    absl::StatusOr<std::string> id = UploadImage(stub(), big);
    ASSERT_TRUE(id.ok());
    grpc::ClientContext ctx;
    v1::IntegralImageRequest req;
    *req.mutable_image() = ById(*id);
    req.mutable_options()->set_squared(true);
    auto reader = stub().IntegralImage(&ctx, req);
    v1::IntegralImageResponse m;
    ASSERT_TRUE(reader->Read(&m));
    ASSERT_TRUE(Delete(stub(), *id).ok());
    while (reader->Read(&m)) {
    }
    const grpc::Status s = reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  }
  EXPECT_TRUE(Eventually([&] { return Idle(stub()); }));
}

TEST(FaultEvictionTest, ImageEvictedWhileItsCallIsQueuedAnswersNotFound) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  const HostImage a = RandomImage({256, 128, 4, SampleType::kUint8}, rng);
  const HostImage b = RandomImage({128, 256, 4, SampleType::kUint8}, rng);
  server::ServerOptions o;
  std::unique_ptr<TestServer> probe = TestServer::Start(o);
  GLIMPSE_REQUIRE_SERVER(probe);
  const bool software = ServerIsSoftware(*probe->stub);
  probe.reset();
  o.worker.store_bytes = StoredBytes(a.desc, software) + 1000;  // room for one of the two
  std::unique_ptr<TestServer> ts = TestServer::Start(o);
  GLIMPSE_REQUIRE_SERVER(ts);
  absl::StatusOr<std::string> ida = UploadImage(*ts->stub, a);
  ASSERT_TRUE(ida.ok()) << ida.status();
  absl::StatusOr<std::string> idb;
  {
    WorkerBlocker blocker(ts->server->worker());
    // B's upload is queued first, then a call on A: storing B evicts A before A's call runs.
    auto upload = std::async(std::launch::async, [&] { return UploadImage(*ts->stub, b); });
    for (int i = 0; i < 500 && ts->server->worker().Stats().queue_length != 1; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    ASSERT_EQ(ts->server->worker().Stats().queue_length, 1u);
    auto call = std::make_unique<AsyncHistogram>(*ts->stub, ById(*ida));
    for (int i = 0; i < 500 && ts->server->worker().Stats().queue_length != 2; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    blocker.Release();
    idb = upload.get();
    const grpc::Status s = call->status.get();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  }
  ASSERT_TRUE(idb.ok()) << idb.status();
  const v1::ServerInfo info = Info(*ts->stub);
  EXPECT_EQ(info.stored_images(), 1u);
  EXPECT_EQ(info.images_evicted(), 1u);
}

// SIGKILL while an upload streams in, then a restart on the same port: a clean start, with no
// image from before listed, an empty store, and the next upload and call served.
TEST(FaultProcessTest, ServerKilledMidUploadRestartsClean) {
#ifndef GLIMPSE_SERVER_BINARY
  GTEST_SKIP() << "built without the glimpse-server binary";
#else
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  const int port = FreePort();
  ASSERT_NE(port, 0);
  const std::string log =
      (std::filesystem::temp_directory_path() / ("glimpse-fault-" + std::to_string(getpid())))
          .string();
  const std::string target = "127.0.0.1:" + std::to_string(port);
  const std::vector<std::string> argv = {GLIMPSE_SERVER_BINARY, "--listen=" + target, "--warm-up=0",
                                         "--log-level=warn"};
  auto stub =
      v1::ImageAnalytics::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  const HostImage img = RandomImage({512, 384, 3, SampleType::kUint8}, rng);
  {
    Child server(argv, log + "-1.log");
    ASSERT_TRUE(ServesWithin(server, target))
        << server.Describe() << ": " << FileText(log + "-1.log");
    ASSERT_TRUE(UploadImage(*stub, img).ok());  // one stored before the kill
    grpc::ClientContext ctx;
    v1::UploadImageResponse resp;
    auto writer = stub->UploadImage(&ctx, &resp);
    v1::UploadImageRequest m;
    *m.mutable_header()->mutable_raw() = Layout(img.desc);
    m.mutable_header()->set_total_bytes(img.data.size());
    m.set_chunk(Bytes(img).substr(0, 100000));
    ASSERT_TRUE(writer->Write(m));
    server.Stop(SIGKILL);
    const grpc::Status s = writer->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  }
  Child server(argv, log + "-2.log");
  ASSERT_TRUE(ServesWithin(server, target))
      << server.Describe() << ": " << FileText(log + "-2.log");
  // A new channel: the old one may still be backing off from the killed server.
  stub =
      v1::ImageAnalytics::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::ListImagesResponse list;
  ASSERT_TRUE(stub->ListImages(&ctx, v1::ListImagesRequest(), &list).ok());
  EXPECT_EQ(list.images_size(), 0);
  EXPECT_TRUE(Idle(*stub));
  absl::StatusOr<std::string> id = UploadImage(*stub, img);
  ASSERT_TRUE(id.ok()) << id.status();
  ExpectServes(*stub, rng);
  std::filesystem::remove(log + "-1.log");
  std::filesystem::remove(log + "-2.log");
#endif
}

}  // namespace
}  // namespace glimpse::testing
