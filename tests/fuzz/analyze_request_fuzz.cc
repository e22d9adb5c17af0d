// A whole Analyze call (upload or inline image, then the analyses) through the generated stub over
// a loopback TCP channel to a real server on the EGL device (llvmpipe in CI), as clients call it.
// The server is started once, with small limits so that every call stays short. (Not gRPC's
// in-process channel: in Debian's gRPC 1.51 it kept about 3 KB per call that the server refused
// before reading the client's half-close (0.2 KB over TCP), so a 20-minute run climbed to 3.5 GB,
// near libFuzzer's RSS limit, on that alone: tests/fuzz/README.md.)
// Input: a serialized glimpse.fuzz.AnalyzeInput (fuzz_inputs.proto): the request stream.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "common/str.h"
#include "fuzz_inputs.pb.h"
#include "glimpse/v1/image_analytics.grpc.pb.h"
#include "server/server.h"
#include "spdlog/spdlog.h"
#include "tests/fuzz/fuzz_check.h"

namespace glimpse::fuzz {
namespace {

// Longer streams add nothing the server's per-message handling has not already seen.
constexpr int kMaxMessages = 16;

struct Served {
  std::unique_ptr<server::GlimpseServer> server;
  std::unique_ptr<v1::ImageAnalytics::Stub> stub;
};

// Null when no EGL context could be opened (then only GLIMPSE_REQUIRE_GPU_CONTEXT=1 fails).
Served* Server() {
  static Served* served = [] {
    // A log line per call would bury libFuzzer's own output.
    spdlog::set_level(spdlog::level::err);
    server::ServerOptions o;
    o.listen = "127.0.0.1:0";
    // One connection for the whole run: an aged-out connection's GOAWAY is not the input's doing.
    o.max_connection_age_s = 0;
    o.worker.device = "auto";
    o.worker.warm_up = false;
    o.worker.store_bytes = uint64_t{16} << 20;
    o.worker.result_buffer_bytes = uint64_t{1} << 20;
    o.limits.max_image_pixels = uint64_t{1} << 14;
    o.limits.max_upload_bytes = uint64_t{1} << 20;
    absl::StatusOr<std::unique_ptr<server::GlimpseServer>> s = server::GlimpseServer::Start(o);
    if (!s.ok()) {
      std::fprintf(stderr, "no server: %s\n", s.status().ToString().c_str());
      const char* require = std::getenv("GLIMPSE_REQUIRE_GPU_CONTEXT");
      if (require != nullptr && std::string(require) == "1") std::abort();
      return static_cast<Served*>(nullptr);
    }
    auto* out = new Served;
    out->server = *std::move(s);
    out->stub = v1::ImageAnalytics::NewStub(grpc::CreateChannel(
        StrCat("127.0.0.1:", out->server->port()), grpc::InsecureChannelCredentials()));
    return out;
  }();
  return served;
}

void Run(const AnalyzeInput& in) {
  Served* served = Server();
  if (served == nullptr || in.messages_size() > kMaxMessages) return;
  grpc::ClientContext ctx;
  // A call on a tiny image that is not done in a minute is a hang, not a slow renderer.
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = served->stub->Analyze(&ctx);
  for (const v1::AnalyzeRequest& m : in.messages()) {
    if (!stream->Write(m)) break;
  }
  stream->WritesDone();
  v1::AnalyzeResponse r;
  int messages = 0;
  bool last_is_timing = false;
  while (stream->Read(&r)) {
    ++messages;
    last_is_timing = r.has_timing();
  }
  const grpc::Status status = stream->Finish();
  const grpc::StatusCode c = status.error_code();
  Check(c != grpc::StatusCode::INTERNAL && c != grpc::StatusCode::UNKNOWN &&
            c != grpc::StatusCode::DATA_LOSS && c != grpc::StatusCode::DEADLINE_EXCEEDED &&
            c != grpc::StatusCode::UNAVAILABLE,
        StrCat("Analyze answered ", int(c), ": ", status.error_message()));
  Check(status.ok() || !status.error_message().empty(), "an error without a message");
  if (status.ok()) {
    Check(messages > 0 && last_is_timing,
          StrCat("an OK Analyze stream of ", messages, " messages does not end with its timing"));
  }
}

}  // namespace
}  // namespace glimpse::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  glimpse::fuzz::AnalyzeInput in;
  if (!in.ParseFromArray(data, int(size))) return 0;
  glimpse::fuzz::Run(in);
  return 0;
}
