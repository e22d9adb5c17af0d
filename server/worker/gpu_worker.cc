#include "server/worker/gpu_worker.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "common/str.h"
#include "server/host_memory.h"
#include "server/observability/metrics.h"
#include "server/rpc/status_util.h"
#include "server/worker/host_pool.h"

namespace glimpse::server {

using SteadyClock = std::chrono::steady_clock;

uint64_t AutoStagingBytes(int decoder_threads) {
  constexpr uint64_t kPerDecoder = uint64_t{32} << 20, kLeast = uint64_t{128} << 20,
                     kMost = uint64_t{1} << 30;
  return std::clamp(kPerDecoder * uint64_t(std::max(decoder_threads, 0)), kLeast, kMost);
}

namespace {
gpu::ContextOptions ContextOptionsFor(const WorkerOptions& o) {
  return {.device = o.device,
          .pin_driver_threads = o.pin_driver_threads,
          .auto_as_gpu = o.gpu_paths,
          .plain_uploads = o.gpu_paths,
          .read_path = o.gpu_paths ? std::optional(gpu::ReadPath::kPinned) : std::nullopt,
          .staging_bytes = size_t(o.staging_bytes.value_or(AutoStagingBytes(DecoderThreads())))};
}
}  // namespace

GpuWorker::GpuWorker(const WorkerOptions& options)
    : options_(options),
      store_(options.store_bytes, options.image_ttl, options.tenant_store_bytes),
      results_(options.result_buffer_bytes),
      queue_({.policy = options.scheduler,
              .max_queued = size_t(std::max(options.max_queue, 1)),
              .tenant_max_queued = size_t(std::max(options.tenant_max_queued, 0))}) {
  // Jobs waiting for result bytes may run as soon as a reader lets some go.
  results_.SetOnRelease([this] { cv_.notify_all(); });
}

absl::StatusOr<std::unique_ptr<GpuWorker>> GpuWorker::Start(const WorkerOptions& options) {
  if (options.max_queue < 1) {
    return absl::InvalidArgumentError(
        StrCat("max_queue must be at least 1, got ", options.max_queue));
  }
  if (options.tenant_max_queued < 0) {
    return absl::InvalidArgumentError(StrCat(
        "tenant_max_queued must be at least 0 (0 = no bound), got ", options.tenant_max_queued));
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
  absl::Status refused;
  std::string_view reason;
  const std::string tenant = job.job_class.tenant;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return absl::UnavailableError("the server is shutting down");
    if (job.result_bytes > results_.budget()) {
      refused = absl::ResourceExhaustedError(
          StrCat("the result needs ", job.result_bytes,
                 " bytes, more than the server's whole result buffer of ", results_.budget(),
                 " bytes (--result-buffer-bytes)"));
      reason = "result_too_large";
    } else {
      const uint64_t estimate = costs_.Estimate(job.method, job.pixels);
      JobClass job_class = job.job_class;
      const size_t waiting = queue_.size(), tenant_waiting = queue_.queued(tenant);
      const Refusal r =
          queue_.Push({std::move(job), SteadyClock::now()}, std::move(job_class), estimate);
      if (r == Refusal::kTenantQueueFull) {
        refused = absl::ResourceExhaustedError(
            StrCat("tenant \"", tenant, "\" has ", tenant_waiting,
                   " GPU jobs waiting, its limit (--tenant-max-queued=", options_.tenant_max_queued,
                   "); retry later"));
      } else if (r == Refusal::kQueueFull) {
        refused = absl::ResourceExhaustedError(
            StrCat("the GPU job queue is full (", waiting,
                   " jobs waiting, limit --max-queue=", options_.max_queue, "); retry later"));
      }
      reason = RefusalName(r);
    }
    if (!refused.ok()) ++jobs_rejected_;
  }
  if (!refused.ok()) {
    RecordTenantRefused(tenant, reason);
    return refused;
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
  WorkerStats stats;
  {
    std::lock_guard lock(mu_);
    stats = {.queue_length = queue_.size(),
             .jobs_run = jobs_run_,
             .jobs_dropped = jobs_dropped_,
             .jobs_rejected = jobs_rejected_,
             .active_tenants = queue_.active_tenants(),
             .jobs_waiting_for_results = waiting_for_results_,
             .programs_built = programs_built_.load(std::memory_order_relaxed),
             .warm_up = warm_up_};
  }
  if (staging_ != nullptr) {
    stats.staging_bytes = staging_->limit();
    stats.staging_mapped_bytes = staging_->mapped();
    stats.staging_used_bytes = staging_->bytes_in_use();
    stats.staging_full = staging_->refused();
  }
  return stats;
}

std::vector<JobClass> GpuWorker::Waiting() {
  std::lock_guard lock(mu_);
  std::vector<JobClass> classes;
  queue_.Visit(
      [&](const Queue::Entry& e) {
        classes.push_back(e.job_class);
        return Queue::Verdict::kKeep;
      },
      nullptr);
  return classes;
}

std::optional<GpuWorker::Queue::Entry> GpuWorker::TakeRunnableLocked(
    Lease* lease, std::vector<Dropped>* dropped) {
  const bool past_drain_deadline = stopping_ && SteadyClock::now() >= drain_deadline_;
  const auto now = std::chrono::system_clock::now();
  waiting_for_results_ = 0;
  bool found = false;
  std::vector<std::string_view> reasons;
  std::vector<absl::Status> statuses;
  std::vector<Queue::Entry> drop_entries;
  std::optional<Queue::Entry> taken = queue_.Visit(
      [&](Queue::Entry& e) {
        const Job& job = e.item.job;
        absl::Status drop;
        std::string_view reason;
        if (past_drain_deadline) {
          drop = absl::UnavailableError("the server shut down before this call's turn on the GPU");
          reason = "shutdown";
        } else if (now >= job.deadline) {
          // Before the cancellation: gRPC cancels a call whose deadline passed, and the metrics
          // should say why.
          drop = absl::DeadlineExceededError(
              job.result_bytes > 0
                  ? "the call's deadline passed while it waited in the GPU queue (or for result "
                    "buffer space, --result-buffer-bytes)"
                  : "the call's deadline passed while it waited in the GPU queue");
          reason = "deadline_exceeded";
        } else if (job.cancelled && job.cancelled()) {
          drop = absl::CancelledError("the call was cancelled while it waited in the GPU queue");
          reason = "cancelled";
        }
        if (!drop.ok()) {
          statuses.push_back(std::move(drop));
          reasons.push_back(reason);
          return Queue::Verdict::kDrop;
        }
        if (!found) {
          std::optional<Lease> l = results_.TryAcquire(job.result_bytes);
          if (l) {
            *lease = *std::move(l);
            found = true;
            return Queue::Verdict::kTake;
          }
        }
        if (job.result_bytes > 0) ++waiting_for_results_;
        return Queue::Verdict::kKeep;
      },
      &drop_entries);
  for (size_t i = 0; i < drop_entries.size(); ++i) {
    ++jobs_dropped_;
    dropped->push_back({std::move(drop_entries[i].item.job), statuses[i], reasons[i]});
  }
  if (taken) ++jobs_run_;
  return taken;
}

void GpuWorker::Loop(std::promise<absl::Status>* started) {
  // Named for top -H and profilers; llvmpipe names its own threads.
  pthread_setname_np(pthread_self(), "glimpse-gpu");
  absl::StatusOr<std::unique_ptr<gpu::Context>> ctx =
      gpu::Context::Create(ContextOptionsFor(options_));
  if (!ctx.ok()) {
    started->set_value(
        Annotate(ctx.status(), StrCat("opening the GL context (--device=", options_.device, ")")));
    return;
  }
  device_ = (*ctx)->info();
  if (gpu::StagingBuffer* staging = (*ctx)->staging()) staging_ = staging->arena();
  auto kernels = std::make_unique<Kernels>(**ctx);
  if (absl::Status s =
          options_.build_programs || options_.warm_up ? kernels->Prepare() : absl::OkStatus();
      !s.ok()) {
    kernels.reset();
    started->set_value(s);
    return;
  }
  if (options_.warm_up) {
    const int threads =
        options_.warm_up_threads > 0 ? options_.warm_up_threads : AutoWarmUpThreads(device_);
    const SteadyClock::time_point t0 = SteadyClock::now();
    if (absl::Status s = WarmUpSideBySide(*kernels, ContextOptionsFor(options_), threads);
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
    std::optional<Queue::Entry> q;
    Lease lease;
    std::vector<Dropped> dropped;
    bool trim = false;
    {
      std::unique_lock lock(mu_);
      q = TakeRunnableLocked(&lease, &dropped);
      const bool run = q.has_value();
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
    for (Dropped& d : dropped) {
      spdlog::debug("{}: dropped unrun: {}", d.job.method, MessageOf(d.status));
      RecordTenantRefused(d.job.job_class.tenant, d.reason);
      if (d.job.drop) d.job.drop(d.status);
    }
    if (trim) {
      ReleaseFreeHostMemory();
      last_trim = SteadyClock::now();
      ran_since_trim = false;
    }
    if (q) {
      Job& job = q->item.job;
      const SteadyClock::time_point start = SteadyClock::now();
      const std::chrono::nanoseconds waited = start - q->item.enqueued;
      job.run(env, std::move(lease), waited);
      // What the job took of the GPU thread, its upload and read-back included, is what it is
      // charged: that is the time no other tenant's job could run.
      const uint64_t ran = uint64_t(std::chrono::nanoseconds(SteadyClock::now() - start).count());
      {
        std::lock_guard lock(mu_);
        queue_.Finish(*q, ran);
        costs_.Observe(job.method, job.pixels, ran);
      }
      RecordTenantJob(q->job_class.tenant, uint64_t(waited.count()), ran);
    }
    ran_since_trim = ran_since_trim || q.has_value() || !dropped.empty();
    programs_built_.store((*ctx)->programs_built(), std::memory_order_relaxed);
    // Staging blocks whose uploads the device has read go back to the decoders.
    if (gpu::StagingBuffer* staging = (*ctx)->staging()) staging->Reclaim();
    // Free what the job's call no longer needs (and what was erased meanwhile) on this thread.
    images.Collect();
  }
  images.Clear();
  kernels.reset();
  ctx->reset();
}

}  // namespace glimpse::server
