// The Prometheus endpoint: a server with metrics on a free loopback port, calls through the
// stub, /metrics fetched with curl, and every counter and histogram compared with what the calls
// themselves report (Timing, message sizes, status codes) and with the worker's and store's own
// figures.
#include "server/observability/metrics.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/service/metrics_scrape.h"
#include "tests/service/service_test_util.h"

namespace glimpse::testing {
namespace {

using gpu::HostImage;
using gpu::SampleType;
using std::chrono::milliseconds;

double Seconds(uint64_t ns) { return double(ns) * 1e-9; }

// What the calls of one analysis and variant reported.
struct Observed {
  std::vector<uint64_t> queue_ns, gpu_ns, server_ns;
  double client_s = 0;  // wall time of the calls as the client saw them
};

// Checks a histogram's change between two scrapes against the observed values: the count, the
// sum and every cumulative bucket (Prometheus buckets count values <= their bound).
void ExpectHistogramMoved(const Scrape& before, const Scrape& after, const std::string& name,
                          const Labels& labels, const std::vector<uint64_t>& ns) {
  SCOPED_TRACE(name + " " + labels.begin()->second + "/" + labels.rbegin()->second);
  EXPECT_EQ(after.Get(name + "_count", labels) - before.Get(name + "_count", labels),
            double(ns.size()));
  double sum = 0;
  for (uint64_t v : ns) sum += Seconds(v);
  EXPECT_NEAR(after.Get(name + "_sum", labels) - before.Get(name + "_sum", labels), sum, 1e-9);
  for (double bound : server::TimeBuckets()) {
    Labels l = labels;
    uint64_t expected = 0;
    for (uint64_t v : ns) expected += Seconds(v) <= bound ? 1 : 0;
    // The exposition prints bounds in its own format; find the bucket by its value.
    double moved = -1;
    for (const char* fmt : {"%g", "%.17g"}) {
      char text[64];
      std::snprintf(text, sizeof text, fmt, bound);
      l["le"] = text;
      if (after.Has(name + "_bucket", l)) {
        moved = after.Get(name + "_bucket", l) - before.Get(name + "_bucket", l);
        break;
      }
    }
    EXPECT_EQ(moved, double(expected)) << "bucket le=" << bound;
  }
  Labels inf = labels;
  inf["le"] = "+Inf";
  EXPECT_EQ(after.Get(name + "_bucket", inf) - before.Get(name + "_bucket", inf),
            double(ns.size()));
}

class MetricsTest : public ::testing::Test {
 protected:
  static std::unique_ptr<TestServer> Start(server::ServerOptions o) {
    o.metrics_listen = "127.0.0.1:0";
    return TestServer::Start(o);
  }
};

TEST_F(MetricsTest, CountersAndHistogramsMoveAsTheCallsSay) {
  std::unique_ptr<TestServer> ts = Start({});
  GLIMPSE_REQUIRE_SERVER(ts);
  const int port = ts->server->metrics_port();
  ASSERT_GT(port, 0);
  std::printf("seed %llu (GLIMPSE_SEED to replay); metrics on port %d\n",
              static_cast<unsigned long long>(TestSeed()), port);
  std::mt19937_64 rng(TestSeed());
  v1::ImageAnalytics::Stub& stub = *ts->stub;
  const bool software = ServerIsSoftware(stub);  // before the baseline: it is a call too

  std::map<std::string, uint64_t> received, sent;            // by method
  std::map<std::pair<std::string, std::string>, int> codes;  // (method, code) -> calls
  std::map<std::pair<std::string, std::string>, Observed> ran;
  uint64_t jobs = 0;
  const Scrape before = Scrape::Fetch(port);

  // Upload a 1xN RGBA image in chunks, then analyse it by id and inline.
  const HostImage img = RandomImage({1, 67, 4, SampleType::kUint8}, rng);
  const HostImage inline_img = RandomImage({31, 17, 3, SampleType::kUint16}, rng);
  std::string id;
  {
    grpc::ClientContext ctx;
    v1::UploadImageResponse response;
    auto writer = stub.UploadImage(&ctx, &response);
    const std::string bytes = Bytes(img);
    for (size_t off = 0; off < bytes.size(); off += 100) {
      v1::UploadImageRequest m;
      if (off == 0) *m.mutable_header()->mutable_raw() = Layout(img.desc);
      m.set_chunk(bytes.substr(off, 100));
      received["UploadImage"] += m.ByteSizeLong();
      ASSERT_TRUE(writer->Write(m));
    }
    writer->WritesDone();
    ASSERT_TRUE(writer->Finish().ok());
    sent["UploadImage"] += response.ByteSizeLong();
    codes[{"UploadImage", "OK"}]++;
    ++jobs;
    id = response.image().image_id();
  }
  const Scrape stored = Scrape::Fetch(port);
  EXPECT_EQ(stored.Get("glimpse_stored_images"), 1);
  EXPECT_EQ(stored.Get("glimpse_stored_bytes"), double(StoredBytes(img.desc, software)));

  for (const std::string variant : {"", "global_atomics", "shared_atomics", "global_atomics"}) {
    for (bool by_id : {true, false}) {
      v1::HistogramRequest req;
      *req.mutable_image() = by_id ? ById(id) : InlineRaw(inline_img);
      req.mutable_options()->set_bins(uint32_t(1 + rng() % 300));
      req.set_variant(variant);
      grpc::ClientContext ctx;
      v1::HistogramResponse resp;
      const auto t0 = std::chrono::steady_clock::now();
      ASSERT_TRUE(stub.Histogram(&ctx, req, &resp).ok());
      Observed& o = ran[{"histogram", resp.variant()}];
      o.client_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      o.queue_ns.push_back(resp.timing().queue_ns());
      o.gpu_ns.push_back(resp.timing().gpu_ns());
      o.server_ns.push_back(resp.timing().server_ns());
      received["Histogram"] += req.ByteSizeLong();
      sent["Histogram"] += resp.ByteSizeLong();
      codes[{"Histogram", "OK"}]++;
      ++jobs;
    }
  }

  // The three streams: sizes of every message, timing from the trailer.
  {
    v1::IntegralImageRequest req;
    *req.mutable_image() = ById(id);
    req.mutable_options()->set_squared(true);
    grpc::ClientContext ctx;
    const auto t0 = std::chrono::steady_clock::now();
    auto reader = stub.IntegralImage(&ctx, req);
    v1::IntegralImageResponse m;
    v1::IntegralTrailer trailer;
    uint64_t bytes = 0;
    while (reader->Read(&m)) {
      bytes += m.ByteSizeLong();
      if (m.has_trailer()) trailer = m.trailer();
    }
    ASSERT_TRUE(reader->Finish().ok());
    Observed& o = ran[{"integral_image", trailer.variant()}];
    o.client_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    o.queue_ns.push_back(trailer.timing().queue_ns());
    o.gpu_ns.push_back(trailer.timing().gpu_ns());
    o.server_ns.push_back(trailer.timing().server_ns());
    received["IntegralImage"] += req.ByteSizeLong();
    sent["IntegralImage"] += bytes;
    codes[{"IntegralImage", "OK"}]++;
    ++jobs;
  }
  {
    v1::CompactRequest req;
    *req.mutable_image() = InlineRaw(inline_img);
    req.mutable_options()->set_lo(1000);
    req.mutable_options()->set_hi(40000);
    grpc::ClientContext ctx;
    const auto t0 = std::chrono::steady_clock::now();
    auto reader = stub.Compact(&ctx, req);
    v1::CompactResponse m;
    std::string variant;
    v1::Timing timing;
    uint64_t bytes = 0;
    while (reader->Read(&m)) {
      bytes += m.ByteSizeLong();
      if (m.has_header()) variant = m.header().variant();
      if (m.has_timing()) timing = m.timing();
    }
    ASSERT_TRUE(reader->Finish().ok());
    Observed& o = ran[{"compaction", variant}];
    o.client_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    o.queue_ns.push_back(timing.queue_ns());
    o.gpu_ns.push_back(timing.gpu_ns());
    o.server_ns.push_back(timing.server_ns());
    received["Compact"] += req.ByteSizeLong();
    sent["Compact"] += bytes;
    codes[{"Compact", "OK"}]++;
    ++jobs;
  }
  {
    v1::BoxFilterRequest req;
    *req.mutable_image() = ById(id);
    req.mutable_options()->set_rx(2);
    req.mutable_options()->set_ry(5);
    req.set_encoding(v1::PIXEL_ENCODING_RAW);
    grpc::ClientContext ctx;
    const auto t0 = std::chrono::steady_clock::now();
    auto reader = stub.BoxFilter(&ctx, req);
    v1::BoxFilterResponse m;
    std::string variant;
    v1::Timing timing;
    uint64_t bytes = 0;
    while (reader->Read(&m)) {
      bytes += m.ByteSizeLong();
      if (m.has_header()) variant = m.header().variant();
      if (m.has_timing()) timing = m.timing();
    }
    ASSERT_TRUE(reader->Finish().ok());
    Observed& o = ran[{"box_filter", variant}];
    o.client_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    o.queue_ns.push_back(timing.queue_ns());
    o.gpu_ns.push_back(timing.gpu_ns());
    o.server_ns.push_back(timing.server_ns());
    received["BoxFilter"] += req.ByteSizeLong();
    sent["BoxFilter"] += bytes;
    codes[{"BoxFilter", "OK"}]++;
    ++jobs;
  }

  // Failures: refused before the queue, and failed on the worker (no kernel ran).
  {
    v1::HistogramRequest req;
    *req.mutable_image() = ById(id);
    req.set_variant("no_such_variant");
    grpc::ClientContext ctx;
    v1::HistogramResponse resp;
    EXPECT_EQ(stub.Histogram(&ctx, req, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    received["Histogram"] += req.ByteSizeLong();
    codes[{"Histogram", "INVALID_ARGUMENT"}]++;
  }
  {
    v1::HistogramRequest req;
    *req.mutable_image() = ById(std::string(32, 'a'));
    grpc::ClientContext ctx;
    v1::HistogramResponse resp;
    EXPECT_EQ(stub.Histogram(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
    received["Histogram"] += req.ByteSizeLong();
    codes[{"Histogram", "NOT_FOUND"}]++;  // answered before any job is queued
  }

  // The store's unary calls, the last one freeing the image.
  v1::ServerInfo info;
  {
    grpc::ClientContext ctx;
    v1::GetServerInfoRequest req;
    ASSERT_TRUE(stub.GetServerInfo(&ctx, req, &info).ok());
    received["GetServerInfo"] += req.ByteSizeLong();
    sent["GetServerInfo"] += info.ByteSizeLong();
    codes[{"GetServerInfo", "OK"}]++;
  }
  {
    grpc::ClientContext ctx;
    v1::ListImagesRequest req;
    v1::ListImagesResponse resp;
    ASSERT_TRUE(stub.ListImages(&ctx, req, &resp).ok());
    received["ListImages"] += req.ByteSizeLong();
    sent["ListImages"] += resp.ByteSizeLong();
    codes[{"ListImages", "OK"}]++;
  }
  {
    grpc::ClientContext ctx;
    v1::GetImageInfoRequest req;
    req.set_image_id(id);
    v1::ImageInfo resp;
    ASSERT_TRUE(stub.GetImageInfo(&ctx, req, &resp).ok());
    received["GetImageInfo"] += req.ByteSizeLong();
    sent["GetImageInfo"] += resp.ByteSizeLong();
    codes[{"GetImageInfo", "OK"}]++;
  }
  {
    grpc::ClientContext ctx;
    v1::DeleteImageRequest req;
    req.set_image_id(id);
    v1::DeleteImageResponse resp;
    ASSERT_TRUE(stub.DeleteImage(&ctx, req, &resp).ok());
    received["DeleteImage"] += req.ByteSizeLong();
    sent["DeleteImage"] += resp.ByteSizeLong();
    codes[{"DeleteImage", "OK"}]++;
  }

  const Scrape after = Scrape::Fetch(port);
  SCOPED_TRACE(after.text());
  for (const auto& [key, n] : codes) {
    EXPECT_EQ(after.Get("glimpse_calls_total", {{"method", key.first}, {"code", key.second}}) -
                  before.Get("glimpse_calls_total", {{"method", key.first}, {"code", key.second}}),
              n)
        << key.first << " " << key.second;
  }
  for (const auto& [method, n] : received) {
    EXPECT_EQ(after.Get("glimpse_received_bytes_total", {{"method", method}}) -
                  before.Get("glimpse_received_bytes_total", {{"method", method}}),
              double(n))
        << method;
  }
  for (const auto& [method, n] : sent) {
    EXPECT_EQ(after.Get("glimpse_sent_bytes_total", {{"method", method}}) -
                  before.Get("glimpse_sent_bytes_total", {{"method", method}}),
              double(n))
        << method;
  }
  // Every analysis ran; histogram in at least the two variants named (auto's choice depends on
  // the device and the random bin counts).
  std::set<std::string> analyses;
  for (const auto& [key, o] : ran) analyses.insert(key.first);
  EXPECT_EQ(analyses,
            (std::set<std::string>{"histogram", "integral_image", "compaction", "box_filter"}));
  EXPECT_TRUE(ran.count({"histogram", "global_atomics"}) &&
              ran.count({"histogram", "shared_atomics"}));
  for (const auto& [key, o] : ran) {
    const Labels labels = {{"analysis", key.first}, {"variant", key.second}};
    ExpectHistogramMoved(before, after, "glimpse_queue_wait_seconds", labels, o.queue_ns);
    ExpectHistogramMoved(before, after, "glimpse_gpu_seconds", labels, o.gpu_ns);
    // The latency is taken when the call is answered: after the Timing it sent, before the
    // client has the answer.
    const double count = after.Get("glimpse_call_latency_seconds_count", labels) -
                         before.Get("glimpse_call_latency_seconds_count", labels);
    EXPECT_EQ(count, double(o.server_ns.size())) << key.first << "/" << key.second;
    double server_s = 0;
    for (uint64_t v : o.server_ns) server_s += Seconds(v);
    const double latency = after.Get("glimpse_call_latency_seconds_sum", labels) -
                           before.Get("glimpse_call_latency_seconds_sum", labels);
    EXPECT_GE(latency, server_s - 1e-9) << key.first << "/" << key.second;
    EXPECT_LE(latency, o.client_s + 1e-9) << key.first << "/" << key.second;
  }
  // No observation for calls that ran no kernel.
  EXPECT_FALSE(after.Has("glimpse_gpu_seconds_count", {{"analysis", ""}, {"variant", ""}}));

  const server::WorkerStats stats = ts->server->worker().Stats();
  EXPECT_EQ(after.Get("glimpse_jobs_total", {{"outcome", "run"}}) -
                before.Get("glimpse_jobs_total", {{"outcome", "run"}}),
            double(jobs));
  EXPECT_EQ(after.Get("glimpse_jobs_total", {{"outcome", "run"}}), double(stats.jobs_run));
  EXPECT_EQ(after.Get("glimpse_jobs_total", {{"outcome", "dropped"}}), 0);
  EXPECT_EQ(after.Get("glimpse_jobs_total", {{"outcome", "rejected"}}), 0);
  EXPECT_EQ(after.Get("glimpse_queued_jobs"), 0);
  EXPECT_EQ(after.Get("glimpse_queue_capacity_jobs"), double(info.max_queue()));
  EXPECT_EQ(after.Get("glimpse_stored_images"), 0);
  EXPECT_EQ(after.Get("glimpse_stored_bytes"), 0);
  EXPECT_EQ(after.Get("glimpse_store_budget_bytes"), double(info.store_budget_bytes()));
  EXPECT_EQ(after.Get("glimpse_build_info", {{"version", info.version()},
                                             {"grpc_version", grpc::Version()},
                                             {"compiler", __VERSION__}}),
            1);
  EXPECT_EQ(after.Get("glimpse_device_info", {{"platform", info.device_platform()},
                                              {"vendor", info.vendor()},
                                              {"renderer", info.renderer()},
                                              {"gl_version", info.gl_version()},
                                              {"software", info.software() ? "true" : "false"}}),
            1);
}

// The client streams' bytes are counted too, and a response stream's are those of the messages
// the client reads (the service encodes them itself: server/rpc/wire.h).
TEST_F(MetricsTest, AnalyzeAndBatchBytesAreCounted) {
  std::unique_ptr<TestServer> ts = Start({});
  GLIMPSE_REQUIRE_SERVER(ts);
  const int port = ts->server->metrics_port();
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed());
  // Large enough that the table's chunks and the filtered pixels go out as slices of their own.
  const HostImage img = RandomImage({211, 97, 3, SampleType::kUint8}, rng);
  const Scrape before = Scrape::Fetch(port);
  uint64_t received = 0, sent = 0;
  {
    grpc::ClientContext ctx;
    auto stream = ts->stub->Analyze(&ctx);
    v1::AnalyzeRequest req;
    *req.mutable_header()->mutable_image() = InlineRaw(img);
    req.mutable_header()->add_analyses()->mutable_integral_image();
    v1::BoxFilterRequest* box = req.mutable_header()->add_analyses()->mutable_box_filter();
    box->mutable_options()->set_rx(2);
    box->mutable_options()->set_ry(1);
    box->set_encoding(v1::PIXEL_ENCODING_RAW);
    ASSERT_TRUE(stream->Write(req));
    stream->WritesDone();
    v1::AnalyzeResponse m;
    while (stream->Read(&m)) sent += m.ByteSizeLong();
    ASSERT_TRUE(stream->Finish().ok());
    received += req.ByteSizeLong();
  }
  uint64_t batch_received = 0, batch_sent = 0;
  {
    grpc::ClientContext ctx;
    auto stream = ts->stub->AnalyzeBatch(&ctx);
    v1::AnalyzeBatchRequest header;
    header.mutable_header()->add_analyses()->mutable_integral_image();
    v1::AnalyzeBatchRequest image;
    image.mutable_image()->set_key("one");
    *image.mutable_image()->mutable_image() = InlineRaw(img);
    ASSERT_TRUE(stream->Write(header));
    ASSERT_TRUE(stream->Write(image));
    stream->WritesDone();
    v1::AnalyzeBatchResponse m;
    while (stream->Read(&m)) batch_sent += m.ByteSizeLong();
    ASSERT_TRUE(stream->Finish().ok());
    batch_received += header.ByteSizeLong() + image.ByteSizeLong();
  }
  const Scrape after = Scrape::Fetch(port);
  SCOPED_TRACE(after.text());
  for (const auto& [method, in, out] :
       {std::tuple<std::string, uint64_t, uint64_t>{"Analyze", received, sent},
        {"AnalyzeBatch", batch_received, batch_sent}}) {
    EXPECT_GT(out, uint64_t(211 * 97 * 3 * 8)) << method << ": the whole table came back";
    EXPECT_EQ(after.Get("glimpse_received_bytes_total", {{"method", method}}) -
                  before.Get("glimpse_received_bytes_total", {{"method", method}}),
              double(in))
        << method;
    EXPECT_EQ(after.Get("glimpse_sent_bytes_total", {{"method", method}}) -
                  before.Get("glimpse_sent_bytes_total", {{"method", method}}),
              double(out))
        << method;
  }
}

TEST_F(MetricsTest, QueueRejectionsDropsEvictionsAndExpiries) {
  const HostImage img = HostImage::Zeros({7, 13, 4, SampleType::kUint8});
  bool software = false;
  {
    std::unique_ptr<TestServer> probe = TestServer::Start({});
    GLIMPSE_REQUIRE_SERVER(probe);
    software = ServerIsSoftware(*probe->stub);
  }
  server::ServerOptions o;
  o.worker.max_queue = 1;
  o.worker.store_bytes = StoredBytes(img.desc, software) * 3 / 2;  // room for one image
  o.worker.image_ttl = std::chrono::seconds(1);
  std::unique_ptr<TestServer> ts = Start(o);
  GLIMPSE_REQUIRE_SERVER(ts);
  const int port = ts->server->metrics_port();
  server::GpuWorker& worker = ts->server->worker();
  v1::ImageAnalytics::Stub& stub = *ts->stub;
  {
    // Connect first, so that the expiring call's deadline is not spent on connection set-up.
    grpc::ClientContext ctx;
    v1::ServerInfo info;
    ASSERT_TRUE(stub.GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  }
  const Scrape before = Scrape::Fetch(port);
  {
    WorkerBlocker blocker(worker);
    grpc::ClientContext late_ctx;
    late_ctx.set_deadline(std::chrono::system_clock::now() + milliseconds(1000));
    v1::HistogramRequest req;
    *req.mutable_image() = InlineRaw(img);
    v1::HistogramResponse late_resp;
    std::promise<grpc::Status> late_done;
    stub.async()->Histogram(&late_ctx, &req, &late_resp,
                            [&](grpc::Status s) { late_done.set_value(s); });
    for (int i = 0; i < 500 && worker.Stats().queue_length < 1; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    const Scrape queued = Scrape::Fetch(port);
    EXPECT_EQ(queued.Get("glimpse_queued_jobs"), 1);

    grpc::ClientContext ctx;
    v1::HistogramResponse resp;
    EXPECT_EQ(stub.Histogram(&ctx, req, &resp).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_EQ(late_done.get_future().get().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
    // The server's copy of the deadline passes a little after the client's.
    std::this_thread::sleep_for(milliseconds(300));
    blocker.Release();
    for (int i = 0; i < 500 && worker.Stats().jobs_dropped < 1; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
  // Two uploads into room for one: the first is evicted; the second expires a second later.
  ASSERT_TRUE(UploadImage(stub, img).ok());
  ASSERT_TRUE(UploadImage(stub, img).ok());
  const Scrape evicted = Scrape::Fetch(port);
  EXPECT_EQ(evicted.Get("glimpse_store_evictions_total"), 1);
  EXPECT_EQ(evicted.Get("glimpse_stored_images"), 1);
  std::this_thread::sleep_for(milliseconds(1300));
  const Scrape after = Scrape::Fetch(port);
  SCOPED_TRACE(after.text());
  EXPECT_EQ(after.Get("glimpse_store_expiries_total"), 1);
  EXPECT_EQ(after.Get("glimpse_store_evictions_total"), 1);
  EXPECT_EQ(after.Get("glimpse_stored_images"), 0);
  EXPECT_EQ(after.Get("glimpse_jobs_total", {{"outcome", "rejected"}}), 1);
  EXPECT_EQ(after.Get("glimpse_jobs_total", {{"outcome", "dropped"}}), 1);
  EXPECT_EQ(after.Get("glimpse_queued_jobs"), 0);
  auto calls = [&](const char* code) {
    return after.Get("glimpse_calls_total", {{"method", "Histogram"}, {"code", code}}) -
           before.Get("glimpse_calls_total", {{"method", "Histogram"}, {"code", code}});
  };
  EXPECT_EQ(calls("RESOURCE_EXHAUSTED"), 1);
  // The server answers a job whose deadline passed in the queue with whichever it notices
  // first: gRPC's cancellation of the call, or the deadline.
  EXPECT_EQ(calls("CANCELLED") + calls("DEADLINE_EXCEEDED"), 1);
}

TEST(MetricsListenTest, AnAddressThatCannotBeBoundIsAStartUpErrorNamingTheFlag) {
  server::ServerOptions o;
  o.metrics_listen = "not-an-address";
  o.listen = "127.0.0.1:0";
  o.worker.warm_up = false;  // the endpoint opens after the worker: no program is needed
  o.worker.build_programs = false;
  absl::StatusOr<std::unique_ptr<server::GlimpseServer>> s = server::GlimpseServer::Start(o);
  if (!s.ok() && s.status().message().find("GL context") != absl::string_view::npos &&
      !RequireGpuContext()) {
    GTEST_SKIP() << "no EGL context";
  }
  ASSERT_FALSE(s.ok());
  const std::string message(s.status().message());
  EXPECT_NE(message.find("--metrics-listen"), std::string::npos) << message;
  EXPECT_NE(message.find("not-an-address"), std::string::npos) << message;
}

}  // namespace
}  // namespace glimpse::testing
