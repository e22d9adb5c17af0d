// Access control through the generated stub against real servers with --tokens: every RPC without
// a valid token is UNAUTHENTICATED while health and reflection stay open; tenant B gets NOT_FOUND
// (worded as for an unknown id) for every call on tenant A's images, kept results included; each
// tenant's share of the store evicts only its own images; reloaded tokens take effect for new
// calls only; and the token file's parser refuses every malformed line, naming file and line.
#include "server/access/access.h"

#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/service/access_test_util.h"
#include "tests/service/analyze_test_util.h"
#include "tests/service/service_test_util.h"

namespace glimpse::testing {
namespace {

using gpu::HostImage;
using gpu::ImageDesc;
using gpu::SampleType;

// ---- the token file -----------------------------------------------------------------------

TEST(TokenFileTest, ParsesTenantsWithCommentsBlankLinesAndSeveralTokensEach) {
  absl::StatusOr<server::TokenTable> t = server::ParseTokens(
      "# tenants\n\nalice  0123456789abcdef0123\n  bob\tBBBBBBBBBBBBBBBBBBBB  # trailing\n"
      "alice zzzzzzzzzzzzzzzzzzzzzz\r\n",
      "t.txt");
  // A comment after the token is a third field: refused, not silently kept.
  ASSERT_FALSE(t.ok());
  EXPECT_NE(std::string(t.status().message()).find("t.txt:4:"), std::string::npos)
      << t.status().message();
  t = server::ParseTokens(
      "# tenants\n\nalice  0123456789abcdef0123\n  bob\tBBBBBBBBBBBBBBBBBBBB\n"
      "alice zzzzzzzzzzzzzzzzzzzzzz\r\n",
      "t.txt");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->entries.size(), 3u);
  ASSERT_NE(t->Find(server::Sha256("0123456789abcdef0123")), nullptr);
  EXPECT_EQ(*t->Find(server::Sha256("0123456789abcdef0123")), "alice");
  EXPECT_EQ(*t->Find(server::Sha256("BBBBBBBBBBBBBBBBBBBB")), "bob");
  EXPECT_EQ(*t->Find(server::Sha256("zzzzzzzzzzzzzzzzzzzzzz")), "alice");
  EXPECT_EQ(t->Find(server::Sha256("0123456789abcdef012")), nullptr);
  EXPECT_EQ(t->Find(server::Sha256("")), nullptr);
}

TEST(TokenFileTest, EveryBadLineIsRefusedNamingFileAndLineButNeverTheToken) {
  const std::string good = "ok-tenant 1111111111111111\n";
  struct Case {
    std::string text;
    std::string expect;  // in the message
    std::string secret;  // must not be
  };
  const std::vector<Case> cases = {
      {good + "lonely\n", "f.txt:2: expected `TENANT TOKEN` or `TENANT TOKEN WEIGHT`, got 1 field",
       ""},
      {good + "a b c d\n",
       "f.txt:2: expected `TENANT TOKEN` or `TENANT TOKEN WEIGHT`, got 4 fields", ""},
      {good + "bad:name 2222222222222222\n", "f.txt:2: tenant \"bad:name\"", "2222222222222222"},
      {good + "x 2222222222222222\nbad*glob 3333333333333333\n", "f.txt:3: tenant", "33333333"},
      {good + std::string(65, 't') + " 2222222222222222\n", "f.txt:2: tenant", "2222222222"},
      {good + "short 123456789012345\n", "f.txt:2: the token of tenant short is 15 characters",
       "123456789012345"},
      {good + "long " + std::string(4097, 'k') + "\n", "is 4097 characters", "kkkkkkkkkk"},
      {good + "bin 22222222\x01"
              "2222222\n",
       "f.txt:2: the token of tenant bin holds a byte", ""},
      {good + "other 1111111111111111\n",
       "f.txt:2: the token of tenant other is also the token of tenant ok-tenant", "1111111111"},
      {"# only comments\n\n", "f.txt: holds no `TENANT TOKEN` line", ""},
      {"", "f.txt: holds no", ""},
  };
  for (const Case& c : cases) {
    absl::StatusOr<server::TokenTable> t = server::ParseTokens(c.text, "f.txt");
    ASSERT_FALSE(t.ok()) << c.text;
    const std::string m(t.status().message());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(m.find(c.expect), std::string::npos) << m;
    if (!c.secret.empty()) {
      EXPECT_EQ(m.find(c.secret), std::string::npos) << m;
    }
  }
}

TEST(TokenFileTest, StartUpRefusesAMissingOrBadFile) {
  TempDir dir;
  server::ServerOptions o;
  o.listen = "";
  o.tokens_file = dir.Write("tokens", "alice 1111111111111111\n\nbob short\n");
  absl::StatusOr<std::unique_ptr<server::GlimpseServer>> s = server::GlimpseServer::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.status().message()).find(o.tokens_file + ":3:"), std::string::npos)
      << s.status().message();
  o.tokens_file = dir.File("missing");
  s = server::GlimpseServer::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.status().message()).find("--tokens: cannot read"), std::string::npos);
}

// ---- a server with tokens -------------------------------------------------------------------

// Every RPC's status code for `stub`, on stored image `id` where the call takes one.
std::map<std::string, grpc::Status> CallEveryRpc(v1::ImageAnalytics::Stub& stub,
                                                 const std::string& id, const HostImage& img) {
  std::map<std::string, grpc::Status> out;
  {
    v1::UploadHeader header;
    *header.mutable_raw() = Layout(img.desc);
    v1::UploadImageResponse r;
    out["UploadImage"] = UploadRaw(stub, header, Bytes(img), &r);
  }
  {
    grpc::ClientContext ctx;
    v1::GetImageInfoRequest req;
    req.set_image_id(id);
    v1::ImageInfo r;
    out["GetImageInfo"] = stub.GetImageInfo(&ctx, req, &r);
  }
  {
    grpc::ClientContext ctx;
    v1::ListImagesResponse r;
    out["ListImages"] = stub.ListImages(&ctx, v1::ListImagesRequest(), &r);
  }
  {
    grpc::ClientContext ctx;
    v1::ServerInfo r;
    out["GetServerInfo"] = stub.GetServerInfo(&ctx, v1::GetServerInfoRequest(), &r);
  }
  {
    grpc::ClientContext ctx;
    v1::HistogramRequest req;
    *req.mutable_image() = ById(id);
    v1::HistogramResponse r;
    out["Histogram"] = stub.Histogram(&ctx, req, &r);
  }
  {
    grpc::ClientContext ctx;
    v1::IntegralImageRequest req;
    *req.mutable_image() = ById(id);
    auto reader = stub.IntegralImage(&ctx, req);
    v1::IntegralImageResponse m;
    while (reader->Read(&m)) {
    }
    out["IntegralImage"] = reader->Finish();
  }
  {
    grpc::ClientContext ctx;
    v1::CompactRequest req;
    *req.mutable_image() = ById(id);
    auto reader = stub.Compact(&ctx, req);
    v1::CompactResponse m;
    while (reader->Read(&m)) {
    }
    out["Compact"] = reader->Finish();
  }
  {
    grpc::ClientContext ctx;
    v1::BoxFilterRequest req;
    *req.mutable_image() = ById(id);
    req.set_encoding(v1::PIXEL_ENCODING_RAW);
    auto reader = stub.BoxFilter(&ctx, req);
    v1::BoxFilterResponse m;
    while (reader->Read(&m)) {
    }
    out["BoxFilter"] = reader->Finish();
  }
  {
    v1::AnalyzeHeader header;
    *header.mutable_image() = ById(id);
    AddEveryAnalysis(&header);
    out["Analyze"] = CallAnalyze(stub, header).status;
  }
  // Last: the image is gone afterwards.
  {
    grpc::ClientContext ctx;
    v1::DeleteImageRequest req;
    req.set_image_id(id);
    v1::DeleteImageResponse r;
    out["DeleteImage"] = stub.DeleteImage(&ctx, req, &r);
  }
  return out;
}

class TenantTest : public TwoTenantTest {
 protected:
  void SetUp() override { Start(server::ServerOptions()); }
};

TEST_F(TenantTest, EveryRpcWithoutAValidTokenIsUnauthenticatedHealthAndReflectionStayOpen) {
  GLIMPSE_REQUIRE_SERVER(ts_);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 1);
  const HostImage img = RandomImage({7, 5, 1, SampleType::kUint8}, rng);
  absl::StatusOr<std::string> id = UploadImage(*alice_, img);
  ASSERT_TRUE(id.ok()) << id.status().message();
  const std::string wrong = RandomToken(rng);
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"no token", ""},
      {"unknown token", "Bearer " + wrong},
      {"another scheme", "Basic " + alice_token_},
      {"a token without its scheme", alice_token_},
      {"a prefix of a token", "Bearer " + alice_token_.substr(0, 31)},
      {"a token with a byte more", "Bearer " + alice_token_ + "0"},
  };
  for (const auto& [what, value] : refused) {
    SCOPED_TRACE(what);
    auto stub = StubWith(target_, value);
    for (const auto& [rpc, status] : CallEveryRpc(*stub, *id, img)) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << rpc << ": " << status.error_message();
      EXPECT_EQ(status.error_message().find(wrong), std::string::npos) << rpc;
      EXPECT_EQ(status.error_message().find(alice_token_), std::string::npos) << rpc;
    }
  }
  // The refused calls touched nothing: alice's image is still there. The scheme's case does not
  // matter (RFC 7235).
  auto lower = StubWith(target_, "bearer " + alice_token_);
  grpc::ClientContext ictx;
  v1::GetImageInfoRequest ireq;
  ireq.set_image_id(*id);
  v1::ImageInfo info;
  EXPECT_TRUE(lower->GetImageInfo(&ictx, ireq, &info).ok());
  grpc::ClientContext sctx;
  v1::ServerInfo server_info;
  ASSERT_TRUE(alice_->GetServerInfo(&sctx, v1::GetServerInfoRequest(), &server_info).ok());
  EXPECT_TRUE(server_info.access_control());

  // Health answers without a token.
  auto health = grpc::health::v1::Health::NewStub(ts_->channel);
  grpc::ClientContext hctx;
  grpc::health::v1::HealthCheckRequest hreq;
  hreq.set_service("glimpse.v1.ImageAnalytics");
  grpc::health::v1::HealthCheckResponse hresp;
  ASSERT_TRUE(health->Check(&hctx, hreq, &hresp).ok());
  EXPECT_EQ(hresp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  // So does reflection.
  absl::StatusOr<std::string> answer = ListServicesByReflection(ts_->channel);
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_NE(answer->find("glimpse.v1.ImageAnalytics"), std::string::npos);
}

// Tenant B's calls on tenant A's image answer exactly as for an id never stored.
TEST_F(TenantTest, AnotherTenantsImageIsNotFoundForEveryCallWordedAsAnUnknownId) {
  GLIMPSE_REQUIRE_SERVER(ts_);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 2);
  const HostImage img = RandomImage({13, 11, 3, SampleType::kUint8}, rng);
  absl::StatusOr<std::string> id = UploadImage(*alice_, img);
  ASSERT_TRUE(id.ok()) << id.status().message();
  const std::string unknown = server::NewImageId();

  const std::map<std::string, grpc::Status> theirs = CallEveryRpc(*bob_, *id, img);
  const std::map<std::string, grpc::Status> none = CallEveryRpc(*bob_, unknown, img);
  for (const auto& [rpc, status] : theirs) {
    SCOPED_TRACE(rpc);
    if (rpc == "UploadImage" || rpc == "ListImages" || rpc == "GetServerInfo") {
      EXPECT_TRUE(status.ok()) << status.error_message();
      continue;
    }
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
    std::string expected = none.at(rpc).error_message();
    ASSERT_NE(expected.find(unknown), std::string::npos) << expected;
    expected.replace(expected.find(unknown), unknown.size(), *id);
    EXPECT_EQ(status.error_message(), expected);
  }
  // Bob lists his two uploads only; alice's image survived his delete, and every call of hers
  // succeeds (the last deletes it).
  grpc::ClientContext lctx;
  v1::ListImagesResponse bobs;
  ASSERT_TRUE(bob_->ListImages(&lctx, v1::ListImagesRequest(), &bobs).ok());
  ASSERT_EQ(bobs.images_size(), 2);
  for (const v1::ImageInfo& i : bobs.images()) EXPECT_NE(i.image_id(), *id);
  grpc::ClientContext actx;
  v1::ListImagesResponse alices;
  ASSERT_TRUE(alice_->ListImages(&actx, v1::ListImagesRequest(), &alices).ok());
  ASSERT_EQ(alices.images_size(), 1);
  EXPECT_EQ(alices.images(0).image_id(), *id);
  EXPECT_EQ(alices.stored_bytes(), alices.images(0).bytes());
  for (const auto& [rpc, status] : CallEveryRpc(*alice_, *id, img)) {
    EXPECT_TRUE(status.ok()) << rpc << ": " << status.error_message();
  }
}

TEST_F(TenantTest, KeptResultsBelongToTheCaller) {
  GLIMPSE_REQUIRE_SERVER(ts_);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 3);
  const HostImage img = RandomImage({17, 9, 1, SampleType::kUint8}, rng);
  absl::StatusOr<std::string> id = UploadImage(*alice_, img);
  ASSERT_TRUE(id.ok());
  // A box filter kept by alice, and an image kept by her Analyze call.
  v1::BoxFilterRequest box;
  *box.mutable_image() = ById(*id);
  box.set_keep(true);
  grpc::ClientContext bctx;
  auto reader = alice_->BoxFilter(&bctx, box);
  v1::BoxFilterResponse m;
  std::string kept_box;
  while (reader->Read(&m)) {
    if (m.has_header()) kept_box = m.header().result().image_id();
  }
  ASSERT_TRUE(reader->Finish().ok());
  v1::AnalyzeHeader header;
  *header.mutable_image() = InlineRaw(img);
  header.set_keep(true);
  header.add_analyses()->mutable_histogram();
  AnalyzeCallResult an = CallAnalyze(*alice_, header);
  ASSERT_TRUE(an.status.ok()) << an.status.error_message();
  ASSERT_TRUE(an.messages[0].has_kept());
  const std::string kept_analyze = an.messages[0].kept().image_id();
  // Bob can neither analyse nor delete them, nor see them listed.
  for (const std::string& kept : {kept_box, kept_analyze}) {
    v1::HistogramRequest req;
    *req.mutable_image() = ById(kept);
    v1::HistogramResponse r;
    grpc::ClientContext b;
    EXPECT_EQ(bob_->Histogram(&b, req, &r).error_code(), grpc::StatusCode::NOT_FOUND);
    v1::DeleteImageRequest del;
    del.set_image_id(kept);
    v1::DeleteImageResponse d;
    grpc::ClientContext bd;
    EXPECT_EQ(bob_->DeleteImage(&bd, del, &d).error_code(), grpc::StatusCode::NOT_FOUND);
    grpc::ClientContext a;
    EXPECT_TRUE(alice_->Histogram(&a, req, &r).ok());
  }
  grpc::ClientContext lctx;
  v1::ListImagesResponse bobs;
  ASSERT_TRUE(bob_->ListImages(&lctx, v1::ListImagesRequest(), &bobs).ok());
  EXPECT_EQ(bobs.images_size(), 0);
  grpc::ClientContext actx;
  v1::ListImagesResponse alices;
  ASSERT_TRUE(alice_->ListImages(&actx, v1::ListImagesRequest(), &alices).ok());
  EXPECT_EQ(alices.images_size(), 3);
}

// The body of http://127.0.0.1:PORT/metrics.
std::string Metrics(int port) {
  const std::string cmd =
      "curl -sS --fail --max-time 20 http://127.0.0.1:" + std::to_string(port) + "/metrics";
  std::string text;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  EXPECT_EQ(pclose(p), 0) << cmd;
  return text;
}

// The value of `series` (name and labels as exported) in a scrape; 0 when absent.
double Series(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  return at == std::string::npos ? 0 : std::stod(text.substr(at + series.size() + 2));
}

TEST_F(TenantTest, RefusedCallsAreCountedByReasonAndNoTokenReachesTheMetrics) {
  server::ServerOptions o;
  o.metrics_listen = "127.0.0.1:0";
  ts_.reset();
  Start(o);
  GLIMPSE_REQUIRE_SERVER(ts_);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 4);
  const int port = ts_->server->metrics_port();
  const std::string no_token = "glimpse_unauthenticated_calls_total{reason=\"no_token\"}";
  const std::string bad_token = "glimpse_unauthenticated_calls_total{reason=\"bad_token\"}";
  // The registry is process-wide: compare with a scrape before.
  const std::string before = Metrics(port);
  const std::string wrong = RandomToken(rng);
  auto anyone = StubWith(target_, "");
  auto guesser = StubWith(target_, "Bearer " + wrong);
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext ctx;
    v1::ListImagesResponse r;
    EXPECT_EQ(anyone->ListImages(&ctx, v1::ListImagesRequest(), &r).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    v1::ServerInfo r;
    EXPECT_EQ(guesser->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &r).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  const std::string after = Metrics(port);
  EXPECT_EQ(Series(after, no_token) - Series(before, no_token), 2) << after;
  EXPECT_EQ(Series(after, bad_token) - Series(before, bad_token), 3) << after;
  EXPECT_EQ(after.find(wrong), std::string::npos);
  EXPECT_EQ(after.find(alice_token_), std::string::npos);
}

}  // namespace
}  // namespace glimpse::testing
