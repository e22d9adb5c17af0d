// Reactors shared by the handlers: a unary call answered from any thread, and a server stream fed
// by a producer thread through a bounded buffer. Both log one line per call when they finish.
#ifndef GLIMPSE_SERVER_CALL_H_
#define GLIMPSE_SERVER_CALL_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "glimpse/v1/image_analytics.pb.h"

namespace glimpse::server {

// What one call's log line says.
class CallRecord {
 public:
  explicit CallRecord(std::string method)
      : method_(std::move(method)), start_(std::chrono::steady_clock::now()) {}
  void set_image(std::string image) { image_ = std::move(image); }
  void set_queue(std::chrono::nanoseconds d) { queue_ns_ = uint64_t(d.count()); }
  void set_gpu_ns(uint64_t ns) { gpu_ns_ = ns; }
  void set_upload_ns(uint64_t ns) { upload_ns_ = ns; }
  void set_decode_ns(uint64_t ns) { decode_ns_ = ns; }
  // The analysis that ran ("histogram", ...) and the variant it used, for the metrics.
  void set_analysis(std::string_view analysis, std::string_view variant) {
    analysis_ = analysis;
    variant_ = variant;
  }
  uint64_t elapsed_ns() const;
  // The Timing message as of now.
  v1::Timing Timing() const;
  // One log line: method, image, status, queue wait, GPU time, total; and the call's metrics.
  void Log(const grpc::Status& status) const;

 private:
  std::string method_;
  std::chrono::steady_clock::time_point start_;
  std::string image_ = "-";
  std::string analysis_, variant_;
  uint64_t queue_ns_ = 0, gpu_ns_ = 0, upload_ns_ = 0, decode_ns_ = 0;
};

// A unary call. Finish from any thread, once.
class UnaryCall : public grpc::ServerUnaryReactor {
 public:
  explicit UnaryCall(std::string method) : record(std::move(method)) {}
  void Answer(const grpc::Status& status) {
    record.Log(status);
    Finish(status);
  }
  void Answer(const absl::Status& status);
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  CallRecord record;

 private:
  void OnCancel() override { cancelled_.store(true, std::memory_order_release); }
  void OnDone() override { delete this; }
  std::atomic<bool> cancelled_{false};
};

// A server stream. One producer (any thread) calls Write for each message, then Close once.
// Write blocks while more than `max_buffered_bytes` wait to be sent, so a slow client slows the
// producer instead of filling memory.
template <typename Response>
class StreamCall : public grpc::ServerWriteReactor<Response> {
 public:
  StreamCall(std::string method, size_t max_buffered_bytes)
      : record(std::move(method)), max_buffered_(max_buffered_bytes) {}

  // CANCELLED once the client has gone away (stop producing, then Close).
  absl::Status Write(Response message) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return cancelled_ || buffered_ <= max_buffered_; });
    if (cancelled_) return absl::CancelledError("the client cancelled the call");
    buffered_ += message.ByteSizeLong();
    pending_.push_back(std::move(message));
    if (writing_) return absl::OkStatus();
    writing_ = true;
    current_ = std::move(pending_.front());
    pending_.pop_front();
    lock.unlock();
    this->StartWrite(&current_);
    return absl::OkStatus();
  }

  // Ends the call with `status` once everything written has been sent (or dropped on failure).
  void Close(const grpc::Status& status) {
    record.Log(status);
    std::unique_lock lock(mu_);
    closed_ = true;
    status_ = status;
    if (writing_) return;  // OnWriteDone finishes
    lock.unlock();
    this->Finish(status);
  }
  void Close(const absl::Status& status);

  bool cancelled() const {
    std::lock_guard lock(mu_);
    return cancelled_;
  }
  CallRecord record;

 private:
  void OnWriteDone(bool ok) override {
    std::unique_lock lock(mu_);
    buffered_ -= std::min(buffered_, current_.ByteSizeLong());
    if (!ok) {
      cancelled_ = true;
      pending_.clear();
      buffered_ = 0;
    }
    if (!pending_.empty()) {
      current_ = std::move(pending_.front());
      pending_.pop_front();
      lock.unlock();
      cv_.notify_all();
      this->StartWrite(&current_);
      return;
    }
    writing_ = false;
    const bool finish = closed_;
    const grpc::Status status = status_;
    lock.unlock();
    cv_.notify_all();
    if (finish) this->Finish(status);
  }
  void OnCancel() override {
    {
      std::lock_guard lock(mu_);
      cancelled_ = true;
    }
    cv_.notify_all();
  }
  void OnDone() override { delete this; }

  const size_t max_buffered_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Response> pending_;
  Response current_;
  size_t buffered_ = 0;
  bool writing_ = false, closed_ = false, cancelled_ = false;
  grpc::Status status_;
};

grpc::Status ToGrpc(const absl::Status& status);

template <typename Response>
void StreamCall<Response>::Close(const absl::Status& status) {
  Close(ToGrpc(status));
}

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_CALL_H_
