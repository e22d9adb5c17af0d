// Reactors shared by the handlers: a unary call answered from any thread, and a server stream fed
// batches of messages that never makes its producer wait. Both log one line per call.
//
//   auto* call = new UnaryCall("GetImageInfo");  // deletes itself once gRPC is done with it
//   absl::StatusOr<const v1::GetImageInfoRequest*> request =
//       call->ParseRequest<v1::GetImageInfoRequest>(bytes);  // kept as long as the call
//   if (!request.ok()) return call->Answer(request.status()), call;
//   ImageInfoOf(env_, id, call->record.tenant(), [call](absl::StatusOr<StoredImageInfo> info) {
//     call->Answer(info.status());  // from any thread, once; logs the call
//   });
//   return call;
//   // A stream: batches handed over with the lease of their bytes, then closed.
//   auto* stream = new StreamCall<v1::CompactResponse>("Compact");
//   if (absl::Status s = stream->Send(std::move(messages), std::move(lease)); !s.ok()) return s;
//   stream->Close(absl::OkStatus());  // once what was sent has been written
#ifndef GLIMPSE_SERVER_RPC_CALL_H_
#define GLIMPSE_SERVER_RPC_CALL_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "glimpse/v1/image_analytics.pb.h"
#include "server/rpc/wire.h"
#include "server/store/result_buffer.h"
#include "server/worker/fair_queue.h"

namespace glimpse::server {

// Nanoseconds since `t0`, for the Timing fields.
inline uint64_t NsSince(std::chrono::steady_clock::time_point t0) {
  return uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
}

// Whether a call is logged and counted: every user's call is (one log line, the metrics of
// server/observability/metrics.h); the start-up's own sample calls (server/request_warm_up.h),
// which no user made, are neither.
enum class CallRecording { kLogAndCount, kNone };

// What one call's log line says.
class CallRecord {
 public:
  explicit CallRecord(std::string method)
      : method_(std::move(method)), start_(std::chrono::steady_clock::now()) {}
  void set_image(std::string image) { image_ = std::move(image); }
  // The tenant the call was admitted as (server/access/access.h): every image it stores is that
  // tenant's, and every id it names is looked up among that tenant's only. "" without access
  // control.
  void set_tenant(std::string tenant) { tenant_ = std::move(tenant); }
  const std::string& tenant() const { return tenant_; }
  // Whom the call's GPU jobs are charged to and in what order (server/worker/job_class.h).
  void set_job_class(JobClass c) { job_class_ = std::move(c); }
  const JobClass& job_class() const { return job_class_; }
  void set_queue(std::chrono::nanoseconds d) { queue_ns_ = uint64_t(d.count()); }
  void set_gpu_ns(uint64_t ns) { gpu_ns_ = ns; }
  // A result produced in parts waits and runs once per part.
  void add_queue(std::chrono::nanoseconds d) { queue_ns_ += uint64_t(d.count()); }
  void add_gpu_ns(uint64_t ns) { gpu_ns_ += ns; }
  void set_upload_ns(uint64_t ns) { upload_ns_ = ns; }
  void set_decode_ns(uint64_t ns) { decode_ns_ = ns; }
  // The analysis that ran ("histogram", ...) and the variant it used, for the metrics.
  void set_analysis(std::string_view analysis, std::string_view variant) {
    analysis_ = analysis;
    variant_ = variant;
  }
  void set_recording(CallRecording r) { recording_ = r; }
  uint64_t elapsed_ns() const;
  // The Timing message as of now.
  v1::Timing Timing() const;
  // One log line: method, image, status, queue wait, GPU time, total; and the call's metrics.
  // Nothing under CallRecording::kNone.
  void Log(const grpc::Status& status) const;

 private:
  std::string method_;
  std::chrono::steady_clock::time_point start_;
  std::string image_ = "-";
  std::string tenant_;
  JobClass job_class_;
  std::string analysis_, variant_;
  uint64_t queue_ns_ = 0, gpu_ns_ = 0, upload_ns_ = 0, decode_ns_ = 0;
  CallRecording recording_ = CallRecording::kLogAndCount;
};

// Set by a reactor's OnCancel, read from any thread. Guarded by a mutex that the constructor
// takes too, so that ThreadSanitizer sees the reactor's construction ordered before OnCancel: gRPC
// orders them inside Debian's uninstrumented libgrpc, where TSan cannot see it (see StreamCall's
// constructor). An atomic cannot give that order: TSan checks an atomic write against the
// constructor's plain initialization before the write's acquire takes effect.
class CancelFlag {
 public:
  CancelFlag() { std::lock_guard lock(mu_); }
  void Set() {
    std::lock_guard lock(mu_);
    set_ = true;
  }
  bool get() const {
    std::lock_guard lock(mu_);
    return set_;
  }

 private:
  mutable std::mutex mu_;
  bool set_ = false;
};

// A call's request message, parsed from the bytes gRPC received (the service registers its
// requests as raw bytes: server/rpc/wire.h) and kept as long as the call, with the bytes of its
// inline image where they arrived (ParseLeavingImageData).
class KeptRequest {
 public:
  template <typename Request>
  absl::StatusOr<const Request*> ParseRequest(const grpc::ByteBuffer& bytes) {
    auto request = std::make_unique<Request>();
    if (absl::Status s = ParseLeavingImageData(bytes, "the request", request.get(), &image_bytes_);
        !s.ok()) {
      return s;
    }
    const Request* parsed = request.get();
    request_ = std::move(request);
    return parsed;
  }
  // The bytes of the request's inline image, empty where they are in the message.
  WireBytes* image_bytes() { return &image_bytes_; }

 private:
  std::unique_ptr<google::protobuf::Message> request_;
  WireBytes image_bytes_;
};

// A unary call. Answer from any thread, once. Holds the lease of its response's bytes until
// gRPC is done with it.
class UnaryCall : public grpc::ServerUnaryReactor, public KeptRequest {
 public:
  explicit UnaryCall(std::string method) : record(std::move(method)) {}
  void Answer(const grpc::Status& status) {
    record.Log(status);
    Finish(status);
  }
  void Answer(const absl::Status& status);
  bool cancelled() const { return cancelled_.get(); }
  CallRecord record;
  Lease lease;

 private:
  void OnCancel() override { cancelled_.Set(); }
  void OnDone() override { delete this; }
  CancelFlag cancelled_;
};

// A server stream that never makes its producer wait. A producer (any thread) hands over whole
// batches of messages with the lease of their bytes; the lease is given back when the batch has
// been sent, or at once when the reader cancels or passes its deadline. Close ends the call once
// everything handed over has been sent. The method's responses are registered as raw bytes
// (server/service.h): each message is encoded when handed over, its large bytes fields given to
// gRPC without a copy (server/rpc/wire.h). `Reactor` is a bidirectional reactor for calls that
// also read a stream (Analyze).
template <typename Response, typename Reactor = grpc::ServerWriteReactor<grpc::ByteBuffer>>
class StreamCall : public Reactor, public KeptRequest {
 public:
  explicit StreamCall(std::string method) : record(std::move(method)) {
    // Publishes the members through mu_. gRPC calls OnCancel on another of its threads, ordered
    // after this constructor by synchronization ThreadSanitizer cannot see in Debian's
    // uninstrumented libgrpc, from a frame with no symbol a suppression could name. Without an
    // edge it can see, TSan reports OnCancel's accesses against the members' initialization
    // whenever it can no longer restore the constructor's stack (tests/tsan.supp).
    std::lock_guard lock(mu_);
  }

  // Queues the messages. `drained` runs (on a gRPC thread) once they have all been sent, or once
  // the reader has gone away (then cancelled() is true): a producer of parts makes the next one
  // there. CANCELLED if the reader has already gone (nothing is queued, drained is not run).
  absl::Status Send(std::vector<Response> messages, Lease lease,
                    std::function<void()> drained = nullptr) {
    std::deque<grpc::ByteBuffer> wire;
    for (Response& m : messages) {
      wire.push_back(EncodeAliasing(std::make_unique<Response>(std::move(m))));
    }
    std::unique_lock lock(mu_);
    if (cancelled_) return absl::CancelledError("the client cancelled the call");
    batches_.push_back({std::move(wire), std::move(lease), std::move(drained)});
    if (!writing_) StartNextLocked(lock);
    return absl::OkStatus();
  }

  // Ends the call with `status` once everything sent has been written (or dropped on failure).
  // Later calls are ignored.
  void Close(const grpc::Status& status) {
    std::unique_lock lock(mu_);
    if (closed_) return;
    closed_ = true;
    status_ = status;
    record.Log(status);
    MaybeFinish(lock);
  }
  void Close(const absl::Status& status);

  bool cancelled() const {
    std::lock_guard lock(mu_);
    return cancelled_;
  }
  CallRecord record;

 private:
  struct Batch {
    std::deque<grpc::ByteBuffer> messages;
    Lease lease;
    std::function<void()> drained;
  };

  // Starts writing the next queued message, running the callbacks of batches that are done.
  void StartNextLocked(std::unique_lock<std::mutex>& lock) {
    std::vector<Batch> done;
    while (!batches_.empty() && batches_.front().messages.empty()) {
      done.push_back(std::move(batches_.front()));
      batches_.pop_front();
    }
    const bool write = !batches_.empty();
    if (write) {
      current_ = std::move(batches_.front().messages.front());
      batches_.front().messages.pop_front();
      writing_ = true;
    }
    lock.unlock();
    if (write) this->StartWrite(&current_);
    for (Batch& b : done) {
      b.lease.Release();
      if (b.drained) b.drained();
    }
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock lock(mu_);
    writing_ = false;
    if (!ok) cancelled_ = true;
    if (cancelled_) {
      std::deque<Batch> dropped;
      dropped.swap(batches_);
      lock.unlock();
      DropAll(dropped);
      lock.lock();
      MaybeFinish(lock);
      return;
    }
    StartNextLocked(lock);
    lock.lock();
    MaybeFinish(lock);
  }

  // Finishes the call once it is closed and nothing is left to write. Unlocks.
  void MaybeFinish(std::unique_lock<std::mutex>& lock) {
    if (finished_ || !closed_ || writing_ || !batches_.empty()) return;
    finished_ = true;
    const grpc::Status status = status_;
    lock.unlock();
    this->Finish(status);
  }

  void OnCancel() override {
    std::unique_lock lock(mu_);
    cancelled_ = true;
    std::deque<Batch> dropped;
    dropped.swap(batches_);
    lock.unlock();
    // Gives the reader's share of the result buffer back now, not when gRPC gets round to it.
    DropAll(dropped);
  }

  static void DropAll(std::deque<Batch>& batches) {
    for (Batch& b : batches) {
      b.messages.clear();
      b.lease.Release();
      if (b.drained) b.drained();
    }
  }

  void OnDone() override { delete this; }

  mutable std::mutex mu_;
  std::deque<Batch> batches_;
  grpc::ByteBuffer current_;
  bool writing_ = false, closed_ = false, cancelled_ = false, finished_ = false;
  grpc::Status status_;
};

grpc::Status ToGrpc(const absl::Status& status);

template <typename Response, typename Reactor>
void StreamCall<Response, Reactor>::Close(const absl::Status& status) {
  Close(ToGrpc(status));
}

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_RPC_CALL_H_
