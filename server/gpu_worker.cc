#include "server/gpu_worker.h"

#include <spdlog/spdlog.h>

#include <optional>

#include "absl/status/status.h"
#include "gpu/str.h"
#include "server/host_memory.h"
#include "server/status_util.h"

namespace glimpse::server {

using SteadyClock = std::chrono::steady_clock;

namespace {
gpu::ContextOptions ContextOptionsFor(const WorkerOptions& o) {
  return {
      .device = o.device, .pin_driver_threads = o.pin_driver_threads, .auto_as_gpu = o.auto_as_gpu};
}
}  // namespace

GpuWorker::GpuWorker(const WorkerOptions& options)
    : options_(options),
      store_(options.store_bytes, options.image_ttl, options.tenant_store_bytes),
      results_(options.result_buffer_bytes) {
  // Jobs waiting for result bytes may run as soon as a reader lets some go.
  results_.SetOnRelease([this] { cv_.notify_all(); });
}

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
    if (job.result_bytes > results_.budget()) {
      ++jobs_rejected_;
      return absl::ResourceExhaustedError(
          StrCat("the result needs ", job.result_bytes,
                 " bytes, more than the server's whole result buffer of ", results_.budget(),
                 " bytes (--result-buffer-bytes)"));
    }
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
          .jobs_rejected = jobs_rejected_,
          .jobs_waiting_for_results = waiting_for_results_,
          .programs_built = programs_built_.load(std::memory_order_relaxed),
          .warm_up = warm_up_};
}

bool GpuWorker::TakeRunnableLocked(Queued* out, Lease* lease,
                                   std::vector<std::pair<Job, absl::Status>>* dropped) {
  const bool past_drain_deadline = stopping_ && SteadyClock::now() >= drain_deadline_;
  const auto now = std::chrono::system_clock::now();
  waiting_for_results_ = 0;
  bool found = false;
  for (auto it = queue_.begin(); it != queue_.end();) {
    Job& job = it->job;
    absl::Status drop;
    if (past_drain_deadline) {
      drop = absl::UnavailableError("the server shut down before this call's turn on the GPU");
    } else if (job.cancelled && job.cancelled()) {
      drop = absl::CancelledError("the call was cancelled while it waited in the GPU queue");
    } else if (now >= job.deadline) {
      drop = absl::DeadlineExceededError(
          job.result_bytes > 0
              ? "the call's deadline passed while it waited in the GPU queue (or for result "
                "buffer space, --result-buffer-bytes)"
              : "the call's deadline passed while it waited in the GPU queue");
    }
    if (!drop.ok()) {
      ++jobs_dropped_;
      dropped->emplace_back(std::move(job), drop);
      it = queue_.erase(it);
      continue;
    }
    if (!found) {
      std::optional<Lease> l = results_.TryAcquire(job.result_bytes);
      if (l) {
        *lease = *std::move(l);
        *out = std::move(*it);
        it = queue_.erase(it);
        found = true;
        ++jobs_run_;
        continue;
      }
    }
    if (job.result_bytes > 0) ++waiting_for_results_;
    ++it;
  }
  return found;
}

void GpuWorker::Loop(std::promise<absl::Status>* started) {
  absl::StatusOr<std::unique_ptr<gpu::Context>> ctx =
      gpu::Context::Create(ContextOptionsFor(options_));
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
  if (options_.warm_up) {
    const int threads = options_.warm_up_threads > 0 ? options_.warm_up_threads
                                                     : AutoWarmUpThreads(device_);
    const SteadyClock::time_point t0 = SteadyClock::now();
    if (absl::Status s = WarmUpSideBySide(*kernels, ContextOptionsFor(options_),
                                          threads);
        !s.ok()) {
      kernels.reset();
      started->set_value(s);
      return;
    }
    warm_up_ = SteadyClock::now() - t0;
    spdlog::info(
        "warm-up: {} GPU programs built, every one `auto` can pick run once, in {:.1f} s with {} "
        "context(s)",
        (*ctx)->programs_built(), std::chrono::duration<double>(warm_up_).count(), threads);
  }
  programs_built_.store((*ctx)->programs_built(), std::memory_order_relaxed);
  started->set_value(absl::OkStatus());  // `started` is gone after this line
  GpuImages images(store_);
  GpuEnv env(**ctx, *kernels, images);

  // Calls free their buffers on other threads after their jobs; a trim when the queue is empty,
  // at most every few seconds, hands what the arenas keep of them back to the system.
  constexpr auto kTrimInterval = std::chrono::seconds(5);
  SteadyClock::time_point last_trim = SteadyClock::now();
  bool ran_since_trim = false;
  while (true) {
    Queued q;
    Lease lease;
    std::vector<std::pair<Job, absl::Status>> dropped;
    bool run = false;
    bool trim = false;
    {
      std::unique_lock lock(mu_);
      run = TakeRunnableLocked(&q, &lease, &dropped);
      if (!run && dropped.empty()) {
        if (queue_.empty() && stopping_) break;
        trim = queue_.empty() && ran_since_trim && SteadyClock::now() - last_trim >= kTrimInterval;
      }
      if (!run && dropped.empty() && !trim) {
        // Wake at least every second to free expired images; more often while jobs wait for
        // result bytes, so their deadlines and cancellations are seen promptly.
        cv_.wait_for(
            lock, queue_.empty() ? std::chrono::milliseconds(1000) : std::chrono::milliseconds(20));
      }
    }
    for (auto& [job, status] : dropped) {
      spdlog::debug("{}: dropped unrun: {}", job.method, MessageOf(status));
      if (job.drop) job.drop(status);
    }
    if (trim) {
      ReleaseFreeHostMemory();
      last_trim = SteadyClock::now();
      ran_since_trim = false;
    }
    if (run) q.job.run(env, std::move(lease), SteadyClock::now() - q.enqueued);
    ran_since_trim = ran_since_trim || run || !dropped.empty();
    programs_built_.store((*ctx)->programs_built(), std::memory_order_relaxed);
    // Free what the job's call no longer needs (and what was erased meanwhile) on this thread.
    images.Collect();
  }
  images.Clear();
  kernels.reset();
  ctx->reset();
}

}  // namespace glimpse::server
