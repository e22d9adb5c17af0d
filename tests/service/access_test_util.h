// Helpers of the access-control tests: stubs that send a tenant's bearer token with every call,
// token files in a temporary directory, and a test CA made with the openssl command.
#ifndef GLIMPSE_TESTS_SERVICE_ACCESS_TEST_UTIL_H_
#define GLIMPSE_TESTS_SERVICE_ACCESS_TEST_UTIL_H_

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "client/authorization_channel.h"
#include "glimpse/v1/image_analytics.grpc.pb.h"
#include "tests/gpu_test_env.h"
#include "tests/service/process_util.h"
#include "tests/service/service_test_util.h"

namespace glimpse::testing {

// A channel whose every call carries `authorization` metadata `value` ("" = none), e.g.
// "Bearer <token>".
inline std::shared_ptr<grpc::Channel> ChannelWith(
    const std::string& target, const std::string& value,
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials(),
    grpc::ChannelArguments args = {}) {
  return client::AuthorizationChannel(target, value, credentials, args);
}

inline std::unique_ptr<v1::ImageAnalytics::Stub> StubWith(
    const std::string& target, const std::string& value,
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials(),
    grpc::ChannelArguments args = {}) {
  return v1::ImageAnalytics::NewStub(ChannelWith(target, value, std::move(credentials), args));
}

// A fresh random token: 32 hex digits.
inline std::string RandomToken(std::mt19937_64& rng) {
  static const char kHex[] = "0123456789abcdef";
  std::string t;
  for (int i = 0; i < 32; ++i) t += kHex[rng() % 16];
  return t;
}

// A directory removed with everything in it when this goes away.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("glimpse-access-test-" + std::to_string(getpid()) + "-" +
             std::to_string(std::random_device{}()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return (path_ / name).string(); }
  // Writes `text` to `name` (replacing it at once, as an editor or a Secret update does).
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string tmp = File(name + ".tmp");
    std::ofstream(tmp, std::ios::binary) << text;
    std::filesystem::rename(tmp, File(name));
    return File(name);
  }
  std::string Read(const std::string& name) const { return FileText(File(name)); }

 private:
  std::filesystem::path path_;
};

// A server whose token file names two tenants, alice and bob, with a stub carrying each one's
// token. Start() then GLIMPSE_REQUIRE_SERVER(ts_).
class TwoTenantTest : public ::testing::Test {
 protected:
  void Start(server::ServerOptions o) {
    std::mt19937_64 rng(TestSeed());
    alice_token_ = RandomToken(rng);
    bob_token_ = RandomToken(rng);
    o.tokens_file = dir_.Write(
        "tokens", "# test tenants\nalice " + alice_token_ + "\nbob " + bob_token_ + "\n");
    ts_ = TestServer::Start(o);
    if (ts_->server == nullptr) return;
    target_ = "127.0.0.1:" + std::to_string(ts_->server->port());
    alice_ = StubWith(target_, "Bearer " + alice_token_);
    bob_ = StubWith(target_, "Bearer " + bob_token_);
  }

  TempDir dir_;
  std::string alice_token_, bob_token_, target_;
  std::unique_ptr<TestServer> ts_;
  std::unique_ptr<v1::ImageAnalytics::Stub> alice_, bob_;
};

}  // namespace glimpse::testing

#endif  // GLIMPSE_TESTS_SERVICE_ACCESS_TEST_UTIL_H_
