#include "server/gpu_worker.h"

#include <spdlog/spdlog.h>

#include "absl/status/status.h"
#include "gpu/str.h"
#include "server/status_util.h"

namespace glimpse::server {

using SteadyClock = std::chrono::steady_clock;

GpuWorker::GpuWorker(const WorkerOptions& options)
    : options_(options), store_(options.store_bytes, options.image_ttl) {}

absl::StatusOr<std::unique_ptr<GpuWorker>> GpuWorker::Start(const WorkerOptions& options) {
  if (options.max_queue < 1) {
    return absl::InvalidArgumentError(
        StrCat("max_queue must be at least 1, got ", options.max_queue));
  }
  std::unique_ptr<GpuWorker> worker(new GpuWorker(options));
  std::promise<absl::Status> started;
  std::future<absl::Status> result = started.get_future();
  worker->thread_ = std::thread([w = worker.get(), &started] { w->Loop(&started); });
  absl::Status s = result.get();
  if (!s.ok()) {
    worker->thread_.join();
    return s;
  }
  return worker;
}

GpuWorker::~GpuWorker() { Stop(SteadyClock::now()); }

absl::Status GpuWorker::Enqueue(Job job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return absl::UnavailableError("the server is shutting down");
    if (queue_.size() >= size_t(options_.max_queue)) {
      ++jobs_rejected_;
      return absl::ResourceExhaustedError(
          StrCat("the GPU job queue is full (", queue_.size(),
                 " jobs waiting, limit --max-queue=", options_.max_queue, "); retry later"));
    }
    queue_.push_back({std::move(job), SteadyClock::now()});
  }
  cv_.notify_one();
  return absl::OkStatus();
}

void GpuWorker::Stop(SteadyClock::time_point drain_deadline) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      stopping_ = true;
      drain_deadline_ = drain_deadline;
    }
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

WorkerStats GpuWorker::Stats() const {
  std::lock_guard lock(mu_);
  return {.queue_length = queue_.size(),
          .jobs_run = jobs_run_,
          .jobs_dropped = jobs_dropped_,
          .jobs_rejected = jobs_rejected_};
}

void GpuWorker::RunOne(GpuEnv& env, Queued& q, bool past_drain_deadline) {
  Job& job = q.job;
  absl::Status drop;
  if (past_drain_deadline) {
    drop = absl::UnavailableError("the server shut down before this call's turn on the GPU");
  } else if (job.cancelled && job.cancelled()) {
    drop = absl::CancelledError("the call was cancelled while it waited in the GPU queue");
  } else if (std::chrono::system_clock::now() >= job.deadline) {
    drop =
        absl::DeadlineExceededError("the call's deadline passed while it waited in the GPU queue");
  }
  if (!drop.ok()) {
    spdlog::debug("{}: dropped unrun: {}", job.method, MessageOf(drop));
    {
      std::lock_guard lock(mu_);
      ++jobs_dropped_;
    }
    if (job.drop) job.drop(drop);
    return;
  }
  {
    std::lock_guard lock(mu_);
    ++jobs_run_;
  }
  job.run(env, SteadyClock::now() - q.enqueued);
}

void GpuWorker::Loop(std::promise<absl::Status>* started) {
  absl::StatusOr<std::unique_ptr<gpu::Context>> ctx =
      gpu::Context::Create(gpu::ContextOptions{.device = options_.device});
  if (!ctx.ok()) {
    started->set_value(
        Annotate(ctx.status(), StrCat("opening the GL context (--device=", options_.device, ")")));
    return;
  }
  device_ = (*ctx)->info();
  auto kernels = std::make_unique<Kernels>(**ctx);
  if (absl::Status s = kernels->Prepare(); !s.ok()) {
    kernels.reset();
    started->set_value(s);
    return;
  }
  started->set_value(absl::OkStatus());  // `started` is gone after this line
  GpuEnv env{**ctx, *kernels, store_};

  while (true) {
    Queued q;
    bool past_deadline = false;
    {
      std::unique_lock lock(mu_);
      // Wake at least every second to free expired images.
      cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {
        if (stopping_) break;
        lock.unlock();
        store_.Collect();
        continue;
      }
      q = std::move(queue_.front());
      queue_.pop_front();
      past_deadline = stopping_ && SteadyClock::now() >= drain_deadline_;
    }
    RunOne(env, q, past_deadline);
    // Free what the job's call no longer needs (and what was erased meanwhile) on this thread.
    store_.Collect();
  }
  store_.Clear();
  kernels.reset();
  ctx->reset();
}

}  // namespace glimpse::server
