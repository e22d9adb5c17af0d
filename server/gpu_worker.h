// The one thread that owns the EGL context: a bounded queue of jobs run one at a time.
#ifndef GLIMPSE_SERVER_GPU_WORKER_H_
#define GLIMPSE_SERVER_GPU_WORKER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "gpu/context.h"
#include "server/image_store.h"
#include "server/kernels.h"

namespace glimpse::server {

// What a job may use. Only valid inside Job::run, on the worker thread.
struct GpuEnv {
  gpu::Context& ctx;
  Kernels& kernels;
  ImageStore& store;
};

struct Job {
  std::string method;  // for logs
  // The work; `queued` is how long it waited. Must answer its call.
  std::function<void(GpuEnv& env, std::chrono::nanoseconds queued)> run;
  // Called instead of run when the job is dropped unrun (cancelled, deadline passed, shutdown).
  // Must answer its call with `status`.
  std::function<void(const absl::Status& status)> drop;
  // True once the caller has gone away; checked before running. Optional.
  std::function<bool()> cancelled;
  // The call's deadline; a job still queued past it is dropped.
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
};

struct WorkerOptions {
  std::string device = "auto";  // gpu::ContextOptions::device
  int max_queue = 64;
  uint64_t store_bytes = uint64_t{2} << 30;
  std::chrono::seconds image_ttl{3600};
};

struct WorkerStats {
  uint64_t queue_length = 0;
  uint64_t jobs_run = 0;
  uint64_t jobs_dropped = 0;   // dequeued unrun: cancelled, expired or shut down
  uint64_t jobs_rejected = 0;  // refused at Enqueue: queue full
};

class GpuWorker {
 public:
  // Starts the thread, which opens the context and prepares every kernel; returns once that is
  // done (or failed: the error is returned and no thread is left).
  static absl::StatusOr<std::unique_ptr<GpuWorker>> Start(const WorkerOptions& options);
  ~GpuWorker();  // Stop(now)
  GpuWorker(const GpuWorker&) = delete;
  GpuWorker& operator=(const GpuWorker&) = delete;

  // Queues the job. RESOURCE_EXHAUSTED (naming --max-queue) when the queue is full, UNAVAILABLE
  // once stopping; the job is then not run and its drop is not called.
  absl::Status Enqueue(Job job);

  // Stops taking jobs, runs the queued ones until `drain_deadline`, drops the rest, frees every
  // GPU object and ends the thread. Idempotent.
  void Stop(std::chrono::steady_clock::time_point drain_deadline);

  WorkerStats Stats() const;
  const gpu::DeviceInfo& device() const { return device_; }
  ImageStore& store() { return store_; }
  int max_queue() const { return options_.max_queue; }

 private:
  struct Queued {
    Job job;
    std::chrono::steady_clock::time_point enqueued;
  };
  explicit GpuWorker(const WorkerOptions& options);
  void Loop(std::promise<absl::Status>* started);
  void RunOne(GpuEnv& env, Queued& q, bool past_drain_deadline);

  const WorkerOptions options_;
  ImageStore store_;
  gpu::DeviceInfo device_;
  std::thread thread_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Queued> queue_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point drain_deadline_;
  uint64_t jobs_run_ = 0, jobs_dropped_ = 0, jobs_rejected_ = 0;
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_GPU_WORKER_H_
