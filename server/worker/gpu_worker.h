// The one thread that owns the EGL context: a bounded queue of jobs run one at a time, tenants
// taking turns by weight (server/worker/fair_queue.h, docs/scheduler.md). A job that produces a
// result takes its bytes from the result buffer before it runs; while they are not free it waits in
// the queue (its deadline still counts) and jobs behind it that fit run first.
//
//   absl::StatusOr<std::unique_ptr<GpuWorker>> worker = GpuWorker::Start(WorkerOptions{});
//   if (!worker.ok()) return worker.status();  // no context, or a shader that does not build
//   Job job;
//   job.method = "Histogram";
//   job.run = [](GpuEnv& env, Lease, std::chrono::nanoseconds) { env.ctx.Finish(); };
//   job.drop = [](const absl::Status& status) { spdlog::warn("{}", MessageOf(status)); };
//   if (absl::Status s = (*worker)->Enqueue(std::move(job)); !s.ok()) return s;  // queue full
//   (*worker)->Stop(std::chrono::steady_clock::now() + std::chrono::seconds(5));
#ifndef GLIMPSE_SERVER_WORKER_GPU_WORKER_H_
#define GLIMPSE_SERVER_WORKER_GPU_WORKER_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gpu/context.h"
#include "server/store/image_store.h"
#include "server/store/result_buffer.h"
#include "server/worker/fair_queue.h"
#include "server/worker/gpu_env.h"

namespace glimpse::server {

struct Job {
  std::string method;  // for logs
  // Result bytes the job needs before it runs (0: none), at most the whole budget.
  uint64_t result_bytes = 0;
  // The work, with the lease of result_bytes; `queued` is how long it waited. Must answer its
  // call (or hand the lease and the answer on).
  std::function<void(GpuEnv& env, Lease lease, std::chrono::nanoseconds queued)> run;
  // Called instead of run when the job is dropped unrun (cancelled, deadline passed, shutdown).
  // Must answer its call with `status`.
  std::function<void(const absl::Status& status)> drop;
  // True once the caller has gone away; checked before running. Optional.
  std::function<bool()> cancelled;
  // The call's deadline; a job still queued past it is dropped.
  std::chrono::system_clock::time_point deadline = std::chrono::system_clock::time_point::max();
  // Whom the job is charged to, at what weight and priority (server/worker/fair_queue.h).
  JobClass job_class;
  // Pixels of the image it reads, for the estimate of its cost (0: unknown).
  uint64_t pixels = 0;
};

// The default staging memory for `decoder_threads` decoders: room for each to hold a 3840x2160
// RGBA image (32 MiB) at once, at least 128 MiB and at most 1 GiB; mapped only as large images
// arrive. An image that finds no room is decoded into a fresh mapping, a page fault per 4 KiB,
// and on a GPU copied by the GL thread (5.9 ms for 3840x2160 RGBA on an H100, against 0.1 ms
// from staging memory: bench/results/nvidia_h100.md).
uint64_t AutoStagingBytes(int decoder_threads);

struct WorkerOptions {
  std::string device = "auto";     // gpu::ContextOptions::device
  bool pin_driver_threads = true;  // gpu::ContextOptions::pin_driver_threads
  // A GPU's paths on a CPU renderer too (gpu::ContextOptions' auto_as_gpu, plain_uploads and
  // pinned read-backs), so that llvmpipe runs and profiles them; no effect on a GPU.
  bool gpu_paths = false;
  int max_queue = 64;
  // Jobs one tenant may have waiting (0 = no bound). Half the default --max-queue: a tenant that
  // floods leaves at least half of the queue to the others, while one client alone can still keep
  // a few dozen calls in flight (an asyncio gather of 20-30 calls is common) without refusals.
  int tenant_max_queued = 32;
  SchedulerPolicy scheduler = SchedulerPolicy::kFair;
  uint64_t store_bytes = uint64_t{2} << 30;
  uint64_t tenant_store_bytes = 0;  // each tenant's share of store_bytes; 0 = no share
  std::chrono::seconds image_ttl{3600};
  uint64_t result_buffer_bytes = uint64_t{256} << 20;
  // gpu::ContextOptions::staging_bytes: the most host memory the decoders write large images into
  // and uploads read as it is. 0 = none; unset, AutoStagingBytes(DecoderThreads()).
  std::optional<uint64_t> staging_bytes;
  // Before Start returns (so before the server reports SERVING), build and run once every
  // program `auto` can pick on this device: no call pays for a shader compile. Seconds with a
  // shader cache on disk; on llvmpipe without one, minutes.
  bool warm_up = true;
  // With warm_up off: whether Start still builds every program a call can need (each kernel's
  // Prepare), so that a driver that cannot compile one fails the start rather than a call. Off,
  // each program is built the first time a call needs it. The server always builds them; an
  // embedder that starts servers by the hundred (the service tests) may not: with Mesa's shader
  // cache warm the build takes 0.6 s of each start, 1.8-2.4 s under the sanitizers.
  bool build_programs = true;
  // Contexts that compile the warm-up side by side, the serving one included (0: auto, see
  // AutoWarmUpThreads in server/analyses/kernels.h).
  int warm_up_threads = 0;
};

struct WorkerStats {
  uint64_t queue_length = 0;
  uint64_t jobs_run = 0;
  uint64_t jobs_dropped = 0;              // dequeued unrun: cancelled, expired or shut down
  uint64_t jobs_rejected = 0;             // refused at Enqueue: queue or tenant's queue full
  uint64_t active_tenants = 0;            // tenants with jobs waiting or running
  uint64_t jobs_waiting_for_results = 0;  // queued jobs whose result bytes are not free now
  uint64_t programs_built = 0;            // GPU programs built so far (warm-up included)
  std::chrono::nanoseconds warm_up{0};    // how long the start-up warm-up took (0: none)
  uint64_t staging_bytes = 0;             // the most staging memory mapped (0: none)
  uint64_t staging_mapped_bytes = 0;      // what is mapped so far
  uint64_t staging_used_bytes = 0;        // held by blocks now
  uint64_t staging_full = 0;              // reservations refused for want of room
};

class GpuWorker {
 public:
  // Starts the thread, which opens the context and prepares every kernel; returns once that is
  // done (or failed: the error is returned and no thread is left).
  static absl::StatusOr<std::unique_ptr<GpuWorker>> Start(const WorkerOptions& options);
  ~GpuWorker();  // Stop(now)
  GpuWorker(const GpuWorker&) = delete;
  GpuWorker& operator=(const GpuWorker&) = delete;

  // Queues the job. RESOURCE_EXHAUSTED when the queue is full (naming --max-queue), the job's
  // tenant has --tenant-max-queued jobs waiting, or its result_bytes exceed the whole result
  // budget (naming --result-buffer-bytes), UNAVAILABLE once stopping; the job is then not run and
  // its drop is not called. Jobs run in the order of the scheduler (server/worker/fair_queue.h).
  absl::Status Enqueue(Job job);

  // Stops taking jobs, runs the queued ones until `drain_deadline`, drops the rest, frees every
  // GPU object and ends the thread. Idempotent.
  void Stop(std::chrono::steady_clock::time_point drain_deadline);

  WorkerStats Stats() const;
  // Orders what the calling thread has written so far before every job the worker runs from now
  // on, through the queue's own lock. For what jobs read that was made after Start (the service
  // the handlers hand them): the handlers learn of it through gRPC's own synchronization, which
  // ThreadSanitizer cannot see in an uninstrumented gRPC.
  void OrderBeforeLaterJobs() { std::lock_guard lock(mu_); }
  // The classes of the jobs waiting now, in the order the scheduler offers them to the worker.
  // Within a tenant that is the order they will run in; between tenants it can change as running
  // jobs charge their tenants what they really took.
  std::vector<JobClass> Waiting();
  const gpu::DeviceInfo& device() const { return device_; }
  ImageStore& store() { return store_; }
  // The staging memory's host side, for the decoders on host threads (gpu/staging.h); null when
  // the worker has none. Set before Start returns.
  gpu::StagingArena* staging() const { return staging_.get(); }
  ResultBuffer& results() { return results_; }
  int max_queue() const { return options_.max_queue; }
  int tenant_max_queued() const { return options_.tenant_max_queued; }
  SchedulerPolicy scheduler() const { return options_.scheduler; }

 private:
  std::shared_ptr<gpu::StagingArena> staging_;
  struct Queued {
    Job job;
    std::chrono::steady_clock::time_point enqueued;
  };
  using Queue = FairQueue<Queued>;
  struct Dropped {
    Job job;
    absl::Status status;
    std::string_view reason;  // the metrics' label
  };
  explicit GpuWorker(const WorkerOptions& options);
  void Loop(std::promise<absl::Status>* started);
  // Under mu_: takes the first queued job, in the scheduler's order, that can run now (its result
  // bytes leased into *lease), moving the ones to drop into *dropped.
  std::optional<Queue::Entry> TakeRunnableLocked(Lease* lease, std::vector<Dropped>* dropped);

  const WorkerOptions options_;
  ImageStore store_;
  ResultBuffer results_;
  gpu::DeviceInfo device_;
  std::thread thread_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  Queue queue_;
  CostModel costs_;
  bool stopping_ = false;
  std::chrono::steady_clock::time_point drain_deadline_;
  uint64_t jobs_run_ = 0, jobs_dropped_ = 0, jobs_rejected_ = 0, waiting_for_results_ = 0;
  // Written by the worker thread, read by Stats() from any thread.
  std::atomic<uint64_t> programs_built_{0};
  std::chrono::nanoseconds warm_up_{0};  // set before Start returns
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_WORKER_GPU_WORKER_H_
