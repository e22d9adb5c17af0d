// Mutual TLS (--tls-client-ca) with a CA made at test time by the openssl command (nothing private
// is kept in the repository): a client certificate is required and verified, its subject CN is
// the tenant without --tokens, and with --tokens the token names the tenant while the certificate
// only admits the connection.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "tests/service/access_test_util.h"
#include "tests/service/service_test_util.h"

namespace glimpse::testing {
namespace {

using gpu::HostImage;
using gpu::SampleType;

// A CA, a server certificate for 127.0.0.1, and client certificates (CN alice, bob, "not a
// tenant"), plus one from another CA (CN alice).
class TestPki {
 public:
  TestPki() {
    const std::string d = dir_.File("");
    const std::string script =
        "set -e; cd '" + d +
        "'\n"
        "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $1.key; }\n"
        "ca() { key $1; openssl req -x509 -new -key $1.key -days 2 -subj \"/CN=$1\" -out $1.crt; "
        "}\n"
        "cert() { key $1; openssl req -new -key $1.key -subj \"$3\" -out $1.csr;\n"
        "  printf '%s\\n' \"$4\" > $1.ext;\n"
        "  openssl x509 -req -in $1.csr -CA $2.crt -CAkey $2.key -CAcreateserial -days 2 "
        "-extfile $1.ext -out $1.crt; }\n"
        "ca ca; ca other-ca\n"
        "cert server ca /CN=localhost 'subjectAltName=DNS:localhost,IP:127.0.0.1'\n"
        "cert alice ca /CN=alice 'extendedKeyUsage=clientAuth'\n"
        "cert bob ca /CN=bob 'extendedKeyUsage=clientAuth'\n"
        "cert odd ca '/CN=not a tenant' 'extendedKeyUsage=clientAuth'\n"
        "cert forged other-ca /CN=alice 'extendedKeyUsage=clientAuth'\n";
    dir_.Write("make.sh", script);
    ok_ = std::system(("bash '" + dir_.File("make.sh") + "' > '" + dir_.File("make.log") + "' 2>&1")
                          .c_str()) == 0;
  }
  bool ok() const { return ok_; }
  std::string log() const { return dir_.Read("make.log"); }
  std::string Path(const std::string& name) const { return dir_.File(name); }
  std::string Pem(const std::string& name) const { return dir_.Read(name); }

  // TLS credentials trusting the CA, with client certificate `who` ("" = none).
  std::shared_ptr<grpc::ChannelCredentials> Client(const std::string& who) const {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = Pem("ca.crt");
    if (!who.empty()) {
      ssl.pem_cert_chain = Pem(who + ".crt");
      ssl.pem_private_key = Pem(who + ".key");
    }
    return grpc::SslCredentials(ssl);
  }

 private:
  TempDir dir_;
  bool ok_ = false;
};

class MutualTlsTest : public ::testing::Test {
 protected:
  void Start(const std::string& tokens_file) {
    ASSERT_TRUE(pki_.ok()) << pki_.log();
    server::ServerOptions o;
    o.tls_cert_file = pki_.Path("server.crt");
    o.tls_key_file = pki_.Path("server.key");
    o.tls_client_ca_file = pki_.Path("ca.crt");
    o.tokens_file = tokens_file;
    ts_ = TestServer::Start(o);
    if (ts_->server != nullptr) target_ = "127.0.0.1:" + std::to_string(ts_->server->port());
  }
  std::unique_ptr<v1::ImageAnalytics::Stub> Stub(const std::string& who,
                                                 const std::string& authorization = "") {
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    return StubWith(target_, authorization, pki_.Client(who), args);
  }

  TestPki pki_;
  std::unique_ptr<TestServer> ts_;
  std::string target_;
};

grpc::Status Info(v1::ImageAnalytics::Stub& stub, const std::string& id, v1::ImageInfo* info) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::GetImageInfoRequest req;
  req.set_image_id(id);
  return stub.GetImageInfo(&ctx, req, info);
}

TEST_F(MutualTlsTest, TheCertificateSubjectIsTheTenantAndACertificateIsRequired) {
  Start("");
  GLIMPSE_REQUIRE_SERVER(ts_);
  GLIMPSE_SEED_TRACE();
  std::mt19937_64 rng(TestSeed() + 20);
  const HostImage img = RandomImage({5, 3, 2, SampleType::kUint8}, rng);
  auto alice = Stub("alice");
  absl::StatusOr<std::string> id = UploadImage(*alice, img);
  ASSERT_TRUE(id.ok()) << id.status().message();
  v1::ImageInfo info;
  EXPECT_TRUE(Info(*alice, *id, &info).ok());
  auto bob = Stub("bob");
  grpc::Status s = Info(*bob, *id, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  grpc::ClientContext lctx;
  v1::ListImagesResponse list;
  ASSERT_TRUE(bob->ListImages(&lctx, v1::ListImagesRequest(), &list).ok());
  EXPECT_EQ(list.images_size(), 0);
  grpc::ClientContext sctx;
  v1::ServerInfo server_info;
  ASSERT_TRUE(alice->GetServerInfo(&sctx, v1::GetServerInfoRequest(), &server_info).ok());
  EXPECT_TRUE(server_info.access_control());

  // A subject that is not a tenant name is refused by the service; no certificate, or one from
  // another CA, never gets past the handshake.
  s = Info(*Stub("odd"), *id, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  EXPECT_NE(s.error_message().find("\"not a tenant\""), std::string::npos) << s.error_message();
  for (const std::string who : {"", "forged"}) {
    s = Info(*Stub(who), *id, &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << who << ": " << s.error_message();
  }
  EXPECT_TRUE(Info(*alice, *id, &info).ok());
}

TEST_F(MutualTlsTest, WithTokensTheTokenNamesTheTenantAndTheCertificateOnlyAdmits) {
  std::mt19937_64 rng(TestSeed() + 21);
  TempDir dir;
  const std::string alice_token = RandomToken(rng), bob_token = RandomToken(rng);
  Start(dir.Write("tokens", "alice " + alice_token + "\nbob " + bob_token + "\n"));
  GLIMPSE_REQUIRE_SERVER(ts_);
  GLIMPSE_SEED_TRACE();
  const HostImage img = RandomImage({3, 5, 1, SampleType::kUint8}, rng);
  // Bob's token over alice's certificate: the image is bob's.
  auto bob_over_alice = Stub("alice", "Bearer " + bob_token);
  absl::StatusOr<std::string> id = UploadImage(*bob_over_alice, img);
  ASSERT_TRUE(id.ok()) << id.status().message();
  v1::ImageInfo info;
  EXPECT_TRUE(Info(*Stub("bob", "Bearer " + bob_token), *id, &info).ok());
  grpc::Status s = Info(*Stub("alice", "Bearer " + alice_token), *id, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  // A certificate without a token is not enough, and a token without a certificate never
  // connects.
  s = Info(*Stub("bob"), *id, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
  s = Info(*Stub("", "Bearer " + bob_token), *id, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST(MutualTlsStartTest, ClientCaWithoutTlsIsAStartUpError) {
  server::ServerOptions o;
  o.listen = "";
  o.tls_client_ca_file = "/nonexistent/ca.crt";
  absl::StatusOr<std::unique_ptr<server::GlimpseServer>> s = server::GlimpseServer::Start(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.status().message()).find("--tls-client-ca needs TLS"), std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace glimpse::testing
