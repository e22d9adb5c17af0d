// Tokens that change while the server runs, and each tenant's share of the store: a reload
// refuses the old token and accepts the new at once while calls admitted before it finish; a bad
// file keeps the tokens in use; SIGHUP does the reload in the glimpse-server process; and storing
// past a tenant's share evicts that tenant's own least recently used images, never another's.
// Also the glimpse-server process's other signals: SIGTERM during the start-up warm-up.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <random>
#include <thread>

#include "tests/service/access_test_util.h"
#include "tests/service/analyze_test_util.h"
#include "tests/service/process_util.h"
#include "tests/service/service_test_util.h"

namespace glimpse::testing {
namespace {

using gpu::HostImage;
using gpu::ImageDesc;
using gpu::SampleType;
using std::chrono_literals::operator""ms;

grpc::StatusCode InfoCode(v1::ImageAnalytics::Stub& stub, v1::ServerInfo* info = nullptr) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::ServerInfo i;
  grpc::StatusCode code = stub.GetServerInfo(&ctx, v1::GetServerInfoRequest(), &i).error_code();
  if (info != nullptr) *info = i;
  return code;
}

class ReloadTest : public TwoTenantTest {};

TEST_F(ReloadTest, ReloadRefusesTheOldTokenAcceptsTheNewAndLeavesAdmittedCallsAlone) {
  Start(server::ServerOptions());
  GLIMPSE_REQUIRE_SERVER(ts_);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 10);
  const HostImage img = RandomImage({31, 7, 1, SampleType::kUint8}, rng);
  absl::StatusOr<std::string> id = UploadImage(*alice_, img);
  ASSERT_TRUE(id.ok());

  // An Analyze call admitted with the old token waits behind a blocked worker during the reload.
  std::future<AnalyzeCallResult> in_flight;
  {
    WorkerBlocker blocker(ts_->server->worker());
    v1::AnalyzeHeader header;
    *header.mutable_image() = InlineRaw(img);
    header.add_analyses()->mutable_histogram();
    in_flight =
        std::async(std::launch::async, [&, header] { return CallAnalyze(*alice_, header); });
    ASSERT_TRUE(Eventually([&] { return ts_->server->worker().Stats().queue_length >= 1; }));

    const std::string rotated = RandomToken(rng);
    dir_.Write("tokens", "alice " + rotated + "\nbob " + bob_token_ + "\n");
    ASSERT_TRUE(ts_->server->ReloadTokens().ok());
    EXPECT_EQ(ts_->server->access().tokens(), 2u);
    EXPECT_EQ(InfoCode(*alice_), grpc::StatusCode::UNAUTHENTICATED);
    auto rotated_stub = StubWith(target_, "Bearer " + rotated);
    EXPECT_EQ(InfoCode(*rotated_stub), grpc::StatusCode::OK);
    EXPECT_EQ(InfoCode(*bob_), grpc::StatusCode::OK);
    // The tenant is the same: alice's image is still hers under the new token.
    grpc::ClientContext ictx;
    v1::GetImageInfoRequest ireq;
    ireq.set_image_id(*id);
    v1::ImageInfo info;
    EXPECT_TRUE(rotated_stub->GetImageInfo(&ictx, ireq, &info).ok());

    // A file that does not parse changes nothing.
    dir_.Write("tokens", "alice " + rotated + "\nbob tooshort\n");
    absl::Status bad = ts_->server->ReloadTokens();
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(std::string(bad.message()).find(dir_.File("tokens") + ":2:"), std::string::npos)
        << bad.message();
    EXPECT_EQ(std::string(bad.message()).find("tooshort"), std::string::npos);
    EXPECT_EQ(InfoCode(*rotated_stub), grpc::StatusCode::OK);
    EXPECT_EQ(InfoCode(*bob_), grpc::StatusCode::OK);
    std::filesystem::remove(dir_.File("tokens"));
    EXPECT_FALSE(ts_->server->ReloadTokens().ok());
    EXPECT_EQ(InfoCode(*bob_), grpc::StatusCode::OK);
  }
  const AnalyzeCallResult r = in_flight.get();
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_TRUE(r.messages.size() >= 2u && r.messages[0].has_histogram());
}

TEST_F(ReloadTest, StoringPastATenantsShareEvictsItsOwnOldestImagesOnly) {
  Start(server::ServerOptions());
  GLIMPSE_REQUIRE_SERVER(ts_);
  GLIMPSE_SEED_TRACE();
  const bool software = ServerIsSoftware(*alice_);
  const ImageDesc desc{64, 32, 1, SampleType::kUint8};
  const uint64_t per = StoredBytes(desc, software);
  const uint64_t share = 2 * per + per / 2;
  server::ServerOptions o;
  o.worker.tenant_store_bytes = share;
  ts_.reset();
  Start(o);
  GLIMPSE_REQUIRE_SERVER(ts_);

  std::mt19937_64 rng(TestSeed() + 11);
  absl::StatusOr<std::string> b1 = UploadImage(*bob_, RandomImage(desc, rng));
  std::vector<std::string> a;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<std::string> id = UploadImage(*alice_, RandomImage(desc, rng));
    ASSERT_TRUE(id.ok()) << id.status().message();
    a.push_back(*id);
  }
  ASSERT_TRUE(b1.ok());
  auto present = [](v1::ImageAnalytics::Stub& stub, const std::string& id) {
    grpc::ClientContext ctx;
    v1::GetImageInfoRequest req;
    req.set_image_id(id);
    v1::ImageInfo info;
    return stub.GetImageInfo(&ctx, req, &info).ok();
  };
  EXPECT_FALSE(present(*alice_, a[0]));  // alice's oldest made room for her third
  EXPECT_TRUE(present(*alice_, a[1]));
  EXPECT_TRUE(present(*alice_, a[2]));
  EXPECT_TRUE(present(*bob_, *b1));  // bob's image is untouched
  grpc::ClientContext lctx;
  v1::ListImagesResponse list;
  ASSERT_TRUE(alice_->ListImages(&lctx, v1::ListImagesRequest(), &list).ok());
  EXPECT_EQ(list.images_size(), 2);
  EXPECT_EQ(list.stored_bytes(), 2 * per);
  EXPECT_EQ(list.budget_bytes(), share);
  v1::ServerInfo info;
  ASSERT_EQ(InfoCode(*alice_, &info), grpc::StatusCode::OK);
  EXPECT_EQ(info.tenant_store_bytes(), share);

  // An image larger than the share is refused, naming the tenant, its use, the request and the
  // limit, and evicts nothing.
  const HostImage big = RandomImage({64, 512, 1, SampleType::kUint8}, rng);
  v1::UploadHeader header;
  *header.mutable_raw() = Layout(big.desc);
  v1::UploadImageResponse resp;
  grpc::Status s = UploadRaw(*alice_, header, Bytes(big), &resp);
  ASSERT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  const std::string m = s.error_message();
  EXPECT_NE(m.find("tenant alice"), std::string::npos) << m;
  EXPECT_NE(m.find(std::to_string(big.desc.bytes()) + " bytes"), std::string::npos) << m;
  EXPECT_NE(m.find(std::to_string(share) + " bytes (--tenant-store-bytes)"), std::string::npos)
      << m;
  EXPECT_NE(m.find("holds " + std::to_string(2 * per) + " bytes"), std::string::npos) << m;
  EXPECT_TRUE(present(*alice_, a[1]));
  EXPECT_TRUE(present(*alice_, a[2]));
}

// ---- the glimpse-server process -------------------------------------------------------------

#ifdef GLIMPSE_SERVER_BINARY
// A glimpse-server process with `args`, its output in `log`.
Child ServerProcess(std::vector<std::string> args, const std::string& log) {
  args.insert(args.begin(), GLIMPSE_SERVER_BINARY);
  return Child(args, log);
}

TEST(ServerProcessTest, SighupReloadsTheTokensAndABadFileKeepsThem) {
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 12);
  TempDir dir;
  const std::string old_token = RandomToken(rng), new_token = RandomToken(rng);
  const std::string file = dir.Write("tokens", "alice " + old_token + "\n");
  const int port = FreePort();
  ASSERT_NE(port, 0);
  const std::string target = "127.0.0.1:" + std::to_string(port);
  Child server = ServerProcess({"--listen=" + target, "--tokens=" + file, "--warm-up=0"},
                               dir.File("server.log"));
  if (!ServesWithin(server, target)) {
    if (RequireGpuContext())
      FAIL() << "no server (" << server.Describe() << "): " << dir.Read("server.log");
    GTEST_SKIP() << "no server (no EGL context?): " << dir.Read("server.log");
  }
  auto old_stub = StubWith(target, "Bearer " + old_token);
  auto new_stub = StubWith(target, "Bearer " + new_token);
  EXPECT_EQ(InfoCode(*old_stub), grpc::StatusCode::OK);
  EXPECT_EQ(InfoCode(*new_stub), grpc::StatusCode::UNAUTHENTICATED);

  dir.Write("tokens", "alice " + new_token + "\n");
  server.Signal(SIGHUP);
  EXPECT_TRUE(Eventually([&] { return InfoCode(*old_stub) == grpc::StatusCode::UNAUTHENTICATED; }));
  EXPECT_EQ(InfoCode(*new_stub), grpc::StatusCode::OK);

  dir.Write("tokens", "alice " + new_token + "\nbob\n");
  server.Signal(SIGHUP);
  EXPECT_TRUE(Eventually([&] {
    return dir.Read("server.log").find("keeping the tokens in use") != std::string::npos;
  }));
  EXPECT_NE(dir.Read("server.log").find(file + ":2:"), std::string::npos);
  EXPECT_EQ(InfoCode(*new_stub), grpc::StatusCode::OK);

  server.Signal(SIGTERM);
  EXPECT_EQ(server.Exited(), 0);
  const std::string log = dir.Read("server.log");
  EXPECT_NE(log.find("access control on"), std::string::npos) << log;
  EXPECT_EQ(log.find(old_token), std::string::npos);
  EXPECT_EQ(log.find(new_token), std::string::npos);
  EXPECT_NE(log.find("tenant=alice"), std::string::npos);
}

TEST(ServerProcessTest, StartUpSaysWhetherAccessControlIsOnAndRefusesABadTokenFile) {
  TempDir dir;
  const std::string file = dir.Write("tokens", "# tenants\nalice\n");
  Child bad = ServerProcess({"--listen=127.0.0.1:0", "--tokens=" + file}, dir.File("bad.log"));
  EXPECT_EQ(bad.Exited(), 1);
  EXPECT_NE(dir.Read("bad.log").find(file + ":2: expected `TENANT TOKEN`"), std::string::npos)
      << dir.Read("bad.log");

  const int port = FreePort();
  const std::string target = "127.0.0.1:" + std::to_string(port);
  Child open = ServerProcess({"--listen=" + target, "--warm-up=0"}, dir.File("open.log"));
  if (!ServesWithin(open, target)) {
    if (RequireGpuContext())
      FAIL() << "no server (" << open.Describe() << "): " << dir.Read("open.log");
    GTEST_SKIP() << "no server (no EGL context?): " << dir.Read("open.log");
  }
  // gRPC's health service answers SERVING for "" from the moment the server starts, a little
  // before the server logs what it is: wait for the line.
  EXPECT_TRUE(Eventually([&] {
    return dir.Read("open.log").find("access control is off") != std::string::npos;
  })) << dir.Read("open.log");
  auto anyone = StubWith(target, "");
  v1::ServerInfo info;
  EXPECT_EQ(InfoCode(*anyone, &info), grpc::StatusCode::OK);
  EXPECT_FALSE(info.access_control());
}

// A server still warming up (with Mesa's shader cache off, a minute or more on llvmpipe) ends at
// SIGTERM rather than once its warm-up is over, as an orchestrator stopping a starting pod expects.
TEST(ServerProcessTest, SigtermWhileWarmingUpExitsWithoutWaitingForIt) {
  TempDir dir;
  const ScopedEnv no_cache("MESA_SHADER_CACHE_DISABLE", "true");  // the child's environment
  Child server = ServerProcess({"--listen=127.0.0.1:0", "--warm-up=1"}, dir.File("server.log"));
  if (!Eventually([&] { return dir.Read("server.log").find("GL context") != std::string::npos; },
                  600)) {
    if (RequireGpuContext()) FAIL() << "no context: " << dir.Read("server.log");
    GTEST_SKIP() << "no server (no EGL context?): " << dir.Read("server.log");
  }
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Exited(200), 0) << "still running 10 s after SIGTERM";
  const std::string log = dir.Read("server.log");
  if (log.find("serving;") != std::string::npos) {
    GTEST_SKIP() << "the warm-up ended before the signal (a fast device): " << log;
  }
  EXPECT_NE(log.find("SIGTERM received while starting: exiting"), std::string::npos) << log;
  EXPECT_EQ(log.find("GPU programs built"), std::string::npos) << log;
}
#endif  // GLIMPSE_SERVER_BINARY

}  // namespace
}  // namespace glimpse::testing
