// --tenant-rate: one tenant flooding two replicas that share a real redis-server is held to one
// bucket for the cluster (not one per replica) while another tenant is still admitted; a replica
// without Redis holds the limit alone; a Redis stopped mid-run leaves each replica limiting
// locally, counted in the fallback metric; bad flag values stop the server naming the flag.
#include "server/access/rate_limit.h"

#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/service/process_util.h"
#include "tests/service/redis_test_util.h"
#include "tests/service/service_test_util.h"

namespace glimpse::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;
using std::chrono_literals::operator""ms;

constexpr double kRate = 8;  // jobs/s: far below what small histograms reach on llvmpipe
constexpr double kBurst = 4;

// What one replica answered a flood.
struct Answers {
  int ok = 0, limited = 0, other = 0;
  std::string limit_message, other_message;
};

grpc::Status CallHistogram(v1::ImageAnalytics::Stub& stub, const v1::HistogramRequest& req,
                           const std::string& tenant) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("glimpse-client-key", tenant);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::HistogramResponse resp;
  return stub.Histogram(&ctx, req, &resp);
}

// `callers` threads per stub call Histogram as `tenant` back to back for `length`; per stub.
// `elapsed`: from before the first call was sent to after the last answer came.
std::vector<Answers> Flood(const std::vector<v1::ImageAnalytics::Stub*>& stubs,
                           const v1::HistogramRequest& req, const std::string& tenant,
                           std::chrono::milliseconds length, int callers, double* elapsed) {
  std::vector<Answers> answers(stubs.size());
  std::mutex mu;
  const SteadyClock::time_point start = SteadyClock::now();
  const SteadyClock::time_point until = start + length;
  std::vector<std::thread> threads;
  for (size_t s = 0; s < stubs.size(); ++s) {
    for (int c = 0; c < callers; ++c) {
      threads.emplace_back([&, s] {
        while (SteadyClock::now() < until) {
          const grpc::Status st = CallHistogram(*stubs[s], req, tenant);
          std::lock_guard lock(mu);
          Answers& a = answers[s];
          if (st.ok()) {
            ++a.ok;
          } else if (st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
            ++a.limited;
            a.limit_message = st.error_message();
          } else {
            ++a.other;
            a.other_message = st.error_message();
          }
        }
      });
    }
  }
  for (std::thread& t : threads) t.join();
  *elapsed = std::chrono::duration<double>(SteadyClock::now() - start).count();
  return answers;
}

// The value of the sample `series` (name{labels} as exposed) at /metrics on `port`; 0 if absent.
double MetricValue(int port, const std::string& series) {
  const std::string cmd =
      "curl -sS --fail --max-time 20 http://127.0.0.1:" + std::to_string(port) + "/metrics 2>&1";
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "cannot run " << cmd;
    return -1;
  }
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << cmd << " failed: " << text;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  }
  return 0;
}

std::string RefusedSeries(const std::string& tenant) {
  return "glimpse_tenant_jobs_refused_total{reason=\"rate\",tenant=\"" + tenant + "\"}";
}
constexpr char kFallbacks[] = "glimpse_tenant_rate_local_fallbacks_total";

std::string LimitMessage(const std::string& tenant) {
  return "tenant \"" + tenant + "\" is over --tenant-rate=8 jobs/s (burst 4); retry later";
}

// A small random image inline, so GPU time is not what limits the calls and no call needs Redis.
v1::HistogramRequest SmallHistogram() {
  std::mt19937_64 rng(TestSeed());
  v1::HistogramRequest req;
  *req.mutable_image() = InlineRaw(RandomImage({37, 23, 1, gpu::SampleType::kUint8}, rng));
  return req;
}

server::ServerOptions RateOptions() {
  server::ServerOptions o;
  o.rate.rate = kRate;
  o.rate.burst = kBurst;
  o.metrics_listen = "127.0.0.1:0";
  return o;
}

class RateLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kRedisServer))
        << kRedisServer << " is missing: deploy/install-deps.sh installs redis-server";
    dir_ = ScratchDir("glimpse-rate-test");
    redis_port_ = FreePort();
    ASSERT_NE(redis_port_, 0);
    redis_ = StartRedis(redis_port_, dir_);
    ASSERT_TRUE(Eventually([&] { return RedisAnswers(redis_port_); }))
        << "redis-server did not start";
    server::ServerOptions o = RateOptions();
    o.redis.address = "127.0.0.1:" + std::to_string(redis_port_);
    o.redis.timeout = std::chrono::milliseconds(1000);
    a_ = TestServer::Start(o);
    b_ = TestServer::Start(o);
    GLIMPSE_REQUIRE_SERVER(a_);
    GLIMPSE_REQUIRE_SERVER(b_);
    // Both replicas see Redis before the flood, so every decision is the shared bucket's.
    ASSERT_TRUE(
        Eventually([&] { return a_->server->redis_reachable() && b_->server->redis_reachable(); }));
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    redis_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::filesystem::path dir_;
  int redis_port_ = 0;
  std::unique_ptr<Child> redis_;
  std::unique_ptr<TestServer> a_, b_;
};

TEST_F(RateLimitTest, TwoReplicasSharingRedisHoldOneTenantToOneBucketAndAdmitOthers) {
  GLIMPSE_SEED_TRACE();
  const v1::HistogramRequest req = SmallHistogram();
  const std::string tenant = "flood";
  const int port = a_->server->metrics_port();
  const double refused_before = MetricValue(port, RefusedSeries(tenant));
  const double fallbacks_before = MetricValue(port, kFallbacks);

  // Another tenant, called on both replicas while the flood runs.
  std::atomic<int> quiet_ok = 0;
  std::string quiet_error;
  std::thread quiet([&] {
    std::this_thread::sleep_for(1500ms);
    for (TestServer* s : {a_.get(), b_.get()}) {
      const grpc::Status st = CallHistogram(*s->stub, req, "quiet");
      if (st.ok())
        ++quiet_ok;
      else
        quiet_error = st.error_message();
    }
  });
  double elapsed = 0;
  const std::vector<Answers> answers =
      Flood({a_->stub.get(), b_->stub.get()}, req, tenant, 3000ms, 3, &elapsed);
  quiet.join();

  const int admitted = answers[0].ok + answers[1].ok;
  const int limited = answers[0].limited + answers[1].limited;
  std::printf("shared: %.2f s, admitted %d (A %d, B %d), refused %d; R*T+B = %.1f\n", elapsed,
              admitted, answers[0].ok, answers[1].ok, limited, kRate * elapsed + kBurst);
  EXPECT_EQ(answers[0].other + answers[1].other, 0)
      << answers[0].other_message << answers[1].other_message;
  // One bucket for both: at most its size plus what refilled meanwhile (one replica's own
  // bucket each would admit about twice that).
  EXPECT_LE(admitted, int(kBurst + kRate * elapsed) + 1);
  EXPECT_GE(admitted, int(kBurst + 0.6 * kRate * elapsed));
  // Each replica admitted some of them: the bucket is taken from both sides.
  EXPECT_GT(answers[0].ok, 0);
  EXPECT_GT(answers[1].ok, 0);
  EXPECT_GT(limited, 0);
  for (const Answers& a : answers) {
    if (a.limited > 0) {
      EXPECT_EQ(a.limit_message, LimitMessage(tenant));
    }
  }
  EXPECT_EQ(quiet_ok.load(), 2) << quiet_error;
  EXPECT_EQ(MetricValue(port, RefusedSeries(tenant)) - refused_before, limited);
  EXPECT_EQ(MetricValue(port, kFallbacks), fallbacks_before) << "Redis never failed";

  grpc::ClientContext ctx;
  v1::ServerInfo info;
  ASSERT_TRUE(b_->stub->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  EXPECT_EQ(info.scheduler().tenant_rate(), kRate);
  EXPECT_EQ(info.scheduler().tenant_burst(), kBurst);
  EXPECT_TRUE(info.scheduler().tenant_rate_shared());
}

TEST_F(RateLimitTest, RedisStoppedMidRunLeavesEachReplicaLimitingLocally) {
  GLIMPSE_SEED_TRACE();
  const v1::HistogramRequest req = SmallHistogram();
  const std::string tenant = "flood-outage";
  const int port = a_->server->metrics_port();
  const double fallbacks_before = MetricValue(port, kFallbacks);
  double elapsed = 0;
  std::vector<Answers> before =
      Flood({a_->stub.get(), b_->stub.get()}, req, tenant, 1000ms, 3, &elapsed);
  EXPECT_LE(before[0].ok + before[1].ok, int(kBurst + kRate * elapsed) + 1);
  EXPECT_EQ(MetricValue(port, kFallbacks), fallbacks_before);

  redis_->Stop(SIGKILL);
  std::vector<Answers> after =
      Flood({a_->stub.get(), b_->stub.get()}, req, tenant, 2000ms, 3, &elapsed);
  std::printf("after the outage: %.2f s, admitted A %d, B %d; refused A %d, B %d\n", elapsed,
              after[0].ok, after[1].ok, after[0].limited, after[1].limited);
  for (const Answers& a : after) {
    EXPECT_EQ(a.other, 0) << a.other_message;  // inline images need no Redis
    // Each replica's own bucket, full when Redis went: its size plus the refill.
    EXPECT_LE(a.ok, int(kBurst + kRate * elapsed) + 1);
    EXPECT_GE(a.ok, int(kBurst + 0.5 * kRate * elapsed));
    EXPECT_GT(a.limited, 0);
    if (a.limited > 0) {
      EXPECT_EQ(a.limit_message, LimitMessage(tenant));
    }
  }
  // Every decision after the outage was a fallback (admitted and refused alike).
  EXPECT_GE(MetricValue(port, kFallbacks) - fallbacks_before,
            after[0].ok + after[0].limited + after[1].ok + after[1].limited);
}

TEST(RateLimitLocalTest, OneReplicaWithoutRedisHoldsTheLimit) {
  GLIMPSE_SEED_TRACE();
  auto ts = TestServer::Start(RateOptions());
  GLIMPSE_REQUIRE_SERVER(ts);
  const v1::HistogramRequest req = SmallHistogram();
  double elapsed = 0;
  const std::vector<Answers> answers = Flood({ts->stub.get()}, req, "solo", 2500ms, 4, &elapsed);
  std::printf("local: %.2f s, admitted %d, refused %d; R*T+B = %.1f\n", elapsed, answers[0].ok,
              answers[0].limited, kRate * elapsed + kBurst);
  EXPECT_EQ(answers[0].other, 0) << answers[0].other_message;
  EXPECT_LE(answers[0].ok, int(kBurst + kRate * elapsed) + 1);
  EXPECT_GE(answers[0].ok, int(kBurst + 0.6 * kRate * elapsed));
  EXPECT_GT(answers[0].limited, 0);
  EXPECT_EQ(answers[0].limit_message, LimitMessage("solo"));
  // Another tenant still has its whole bucket.
  for (int i = 0; i < int(kBurst); ++i) {
    EXPECT_TRUE(CallHistogram(*ts->stub, req, "other").ok()) << i;
  }
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  ASSERT_TRUE(ts->stub->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info).ok());
  EXPECT_EQ(info.scheduler().tenant_rate(), kRate);
  EXPECT_FALSE(info.scheduler().tenant_rate_shared());
}

// An Analyze call takes one token whatever its steps.
TEST(RateLimitLocalTest, AnalyzeTakesOneTokenPerCall) {
  GLIMPSE_SEED_TRACE();
  server::ServerOptions o = RateOptions();
  o.rate.rate = 0.01;  // no refill within the test
  o.rate.burst = 2;
  auto ts = TestServer::Start(o);
  GLIMPSE_REQUIRE_SERVER(ts);
  std::mt19937_64 rng(TestSeed());
  v1::AnalyzeRequest first;
  *first.mutable_header()->mutable_image() =
      InlineRaw(RandomImage({19, 7, 1, gpu::SampleType::kUint8}, rng));
  for (int i = 0; i < 3; ++i) first.mutable_header()->add_analyses()->mutable_histogram();
  for (int call = 0; call < 3; ++call) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("glimpse-client-key", "analyst");
    auto stream = ts->stub->Analyze(&ctx);
    stream->Write(first);
    stream->WritesDone();
    v1::AnalyzeResponse r;
    while (stream->Read(&r)) {
    }
    const grpc::Status st = stream->Finish();
    if (call < 2) {
      EXPECT_TRUE(st.ok()) << call << ": " << st.error_message();
    } else {
      EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
      EXPECT_EQ(st.error_message(),
                "tenant \"analyst\" is over --tenant-rate=0.01 jobs/s (burst 2); retry later");
    }
  }
}

TEST(RateLimiterTest, LocalBucketRefillsAtTheRateUpToTheBurst) {
  server::RateLimiter limiter({.rate = 2, .burst = 3}, nullptr);
  const SteadyClock::time_point t0 = SteadyClock::now();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.TakeLocal("a", t0)) << i;
  EXPECT_FALSE(limiter.TakeLocal("a", t0));
  EXPECT_TRUE(limiter.TakeLocal("b", t0));  // tenants apart
  EXPECT_FALSE(limiter.TakeLocal("a", t0 + 499ms));
  EXPECT_TRUE(limiter.TakeLocal("a", t0 + 500ms));  // 2/s: one token after 0.5 s
  EXPECT_FALSE(limiter.TakeLocal("a", t0 + 500ms));
  const SteadyClock::time_point later = t0 + std::chrono::seconds(60);  // capped at the burst
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.TakeLocal("a", later)) << i;
  EXPECT_FALSE(limiter.TakeLocal("a", later));
  EXPECT_EQ(server::RateLimiter({.rate = 0.5, .burst = 0}, nullptr).burst(), 1);
  EXPECT_EQ(server::RateLimiter({.rate = 7.5, .burst = 0}, nullptr).burst(), 7.5);
}

TEST(RateLimitFlagsTest, BadValuesAreRefusedAtStartNamingTheFlag) {
  struct Case {
    server::RateLimitOptions options;
    std::string want;
  };
  for (const Case& c :
       std::vector<Case>{{{.rate = -1, .burst = 0},
                          "--tenant-rate must be a number of jobs per second in [0, "
                          "1000000] (0 = no limit), got -1"},
                         {{.rate = 5, .burst = 0.5},
                          "--tenant-burst must be 0 (= max(1, --tenant-rate)) or in "
                          "[1, 1000000000] (a job takes one token), got 0.5"},
                         {{.rate = 0, .burst = 3},
                          "--tenant-burst=3 needs --tenant-rate above 0 "
                          "(--tenant-rate=0 means no limit)"}}) {
    server::ServerOptions o;
    o.rate = c.options;
    auto ts = TestServer::Start(o);
    EXPECT_EQ(ts->server, nullptr);
    EXPECT_EQ(ts->error, c.want);
  }
#ifdef GLIMPSE_SERVER_BINARY
  // The binary's own parsing: exit status 2 and the flag and value on stderr, before any GPU work.
  for (const auto& [args, want] : std::vector<std::pair<std::string, std::string>>{
           {"--tenant-rate=fast", "--tenant-rate must be a number in [0, 1000000], got \"fast\""},
           {"--tenant-rate=-2", "--tenant-rate must be a number in [0, 1000000], got \"-2\""},
           {"--tenant-rate=5 --tenant-burst=0.5", "--tenant-burst must be 0"},
           {"--tenant-burst=3", "--tenant-burst=3 needs --tenant-rate above 0"}}) {
    const std::string cmd =
        std::string(GLIMPSE_SERVER_BINARY) + " --listen=127.0.0.1:0 " + args + " 2>&1";
    std::FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[1024];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int rc = pclose(p);
    EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 2) << args << ": " << out;
    EXPECT_NE(out.find(want), std::string::npos) << args << ": " << out;
  }
#endif
}

}  // namespace
}  // namespace glimpse::testing
