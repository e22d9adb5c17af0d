#include "server/rpc/call.h"

#include <spdlog/spdlog.h>

#include "server/observability/metrics.h"
#include "server/rpc/status_util.h"

namespace glimpse::server {

grpc::Status ToGrpc(const absl::Status& status) { return ToGrpcStatus(status); }

void UnaryCall::Answer(const absl::Status& status) { Answer(ToGrpcStatus(status)); }

uint64_t CallRecord::elapsed_ns() const {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - start_)
                      .count());
}

v1::Timing CallRecord::Timing() const {
  v1::Timing t;
  t.set_queue_ns(queue_ns_);
  t.set_gpu_ns(gpu_ns_);
  t.set_upload_ns(upload_ns_);
  t.set_decode_ns(decode_ns_);
  t.set_server_ns(elapsed_ns());
  return t;
}

void CallRecord::Log(const grpc::Status& status) const {
  if (recording_ == CallRecording::kNone) return;
  const double ms = 1e-6;
  const uint64_t elapsed = elapsed_ns();
  const auto level = status.ok() ? spdlog::level::info : spdlog::level::warn;
  spdlog::log(level, "{}{}{} image={} status={}{}{} queue={:.3f}ms gpu={:.3f}ms total={:.3f}ms",
              method_, tenant_.empty() ? "" : " tenant=", tenant_, image_,
              GrpcCodeName(status.error_code()), status.ok() ? "" : " error=\"",
              status.ok() ? "" : status.error_message() + "\"", queue_ns_ * ms, gpu_ns_ * ms,
              elapsed * ms);
  RecordCall({method_, status.error_code(), analysis_, variant_, queue_ns_, gpu_ns_, elapsed});
}

}  // namespace glimpse::server
