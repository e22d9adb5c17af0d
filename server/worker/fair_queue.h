// The GPU worker's queue: fair queueing of jobs between tenants (start-time fair queueing on each
// job's cost), or first come, first served.
//
// Each tenant has a virtual time: the GPU time its jobs have taken, divided by its weight. The
// next job comes from the tenant with jobs waiting whose virtual time is least, so every tenant
// with work waiting gets GPU time in proportion to its weight, however much any tenant queues. A
// job is charged its estimated cost when it is taken and corrected to its measured time once it
// has run. A tenant that had nothing waiting or running starts again at the virtual time of the
// job taken last (no credit saved up while idle, no debt from before). Within a tenant,
// interactive jobs go before batch ones, each kind in arrival order; the order between tenants
// does not look at priorities. With one tenant the queue is its jobs in that order: the GPU is
// never left idle while a job could run.
//
// Example:
//   FairQueue<Job> q({.policy = SchedulerPolicy::kFair, .max_queued = 64});
//   q.Push(job, {.tenant = "alice", .weight = 3}, /*estimate_ns=*/2'000'000);
//   std::vector<FairQueue<Job>::Entry> dropped;
//   std::optional<FairQueue<Job>::Entry> next = q.Visit([](auto&) { return kTake; }, &dropped);
//   ... run next->item ...
//   q.Finish(*next, measured_ns);
//
// Not thread-safe: the GPU worker holds its mutex around every call.
#ifndef GLIMPSE_SERVER_WORKER_FAIR_QUEUE_H_
#define GLIMPSE_SERVER_WORKER_FAIR_QUEUE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace glimpse::server {

// A job's priority within its tenant (metadata `glimpse-priority`).
enum class Priority { kInteractive = 0, kBatch = 1 };
std::string_view PriorityName(Priority p);
std::optional<Priority> ParsePriority(std::string_view s);

// --scheduler: fair (the default) or fifo (first come, first served, for comparisons).
enum class SchedulerPolicy { kFair, kFifo };
std::string_view PolicyName(SchedulerPolicy p);
std::optional<SchedulerPolicy> ParsePolicy(std::string_view s);

// Whom a job is charged to, and how it is ordered.
struct JobClass {
  // The tenant (access control), else the client's glimpse-client-key, else its peer host.
  std::string tenant;
  double weight = 1;  // share of the GPU relative to the other tenants with work waiting
  Priority priority = Priority::kInteractive;
};

struct FairQueueOptions {
  SchedulerPolicy policy = SchedulerPolicy::kFair;
  size_t max_queued = 64;        // jobs waiting, all tenants together (--max-queue)
  size_t tenant_max_queued = 0;  // jobs waiting per tenant (--tenant-max-queued); 0 = no bound
};

// Why Push refused a job.
enum class Refusal { kNone, kQueueFull, kTenantQueueFull };
std::string_view RefusalName(Refusal r);  // the metrics' reason: "queue_full", ...

// Estimates a job's cost before it runs: its pixels times its method's nanoseconds per pixel,
// learned from the jobs of that method that have run (a moving average).
class CostModel {
 public:
  // Nanoseconds per pixel assumed for a method not seen yet (llvmpipe's box filter, r=7).
  static constexpr double kDefaultNsPerPixel = 5;
  uint64_t Estimate(std::string_view method, uint64_t pixels) const;
  void Observe(std::string_view method, uint64_t pixels, uint64_t ns);

 private:
  std::map<std::string, double, std::less<>> ns_per_pixel_;
};

template <typename T>
class FairQueue {
 public:
  struct Entry {
    T item;
    JobClass job_class;
    uint64_t estimate_ns = 0;
  };
  enum class Verdict { kKeep, kDrop, kTake };

  explicit FairQueue(FairQueueOptions options) : options_(options) {}

  // Queues `item`, or refuses it (kTenantQueueFull before kQueueFull); a refused item is not
  // queued. A tenant's latest weight is the one used.
  Refusal Push(T item, JobClass job_class, uint64_t estimate_ns) {
    const auto found = tenants_.find(job_class.tenant);
    const size_t tenant_queued = found != tenants_.end() ? found->second.queued : 0;
    if (options_.tenant_max_queued > 0 && tenant_queued >= options_.tenant_max_queued) {
      return Refusal::kTenantQueueFull;
    }
    if (size_ >= options_.max_queued) return Refusal::kQueueFull;
    Tenant& t = found != tenants_.end() ? found->second : tenants_[job_class.tenant];
    t.weight = job_class.weight > 0 ? job_class.weight : 1;
    if (t.queued == 0 && t.running == 0) t.vtime = std::max(t.vtime, vnow_);
    ++t.queued;
    ++size_;
    const Priority priority = job_class.priority;
    Entry e{std::move(item), std::move(job_class), estimate_ns};
    if (options_.policy == SchedulerPolicy::kFifo) {
      fifo_.push_back(std::move(e));
    } else {
      t.jobs[int(priority)].push_back(std::move(e));
    }
    return Refusal::kNone;
  }

  // Offers every queued entry, in service order, to `decide` (Verdict(Entry&)): kDrop removes it
  // into *dropped; the first kTake removes it and charges its tenant its estimate (later kTake
  // answers count as kKeep). Returns the taken entry, if any; pass it to Finish once it has run.
  template <typename Decide>
  std::optional<Entry> Visit(Decide&& decide, std::vector<Entry>* dropped) {
    std::optional<Entry> taken;
    auto visit = [&](std::deque<Entry>& jobs) {
      for (auto it = jobs.begin(); it != jobs.end();) {
        const Verdict v = decide(*it);
        if (v == Verdict::kKeep || (v == Verdict::kTake && taken)) {
          ++it;
          continue;
        }
        Tenant& t = tenants_.find(it->job_class.tenant)->second;
        --t.queued;
        --size_;
        if (v == Verdict::kDrop) {
          dropped->push_back(std::move(*it));
        } else {
          taken = std::move(*it);
          Charge(t, taken->estimate_ns);
        }
        it = jobs.erase(it);
      }
    };
    if (options_.policy == SchedulerPolicy::kFifo) {
      visit(fifo_);
    } else {
      std::vector<Tenant*> order;
      for (auto& [name, t] : tenants_) {
        if (t.queued > 0) order.push_back(&t);
      }
      // Stable: equal tenants go by name, so the order is the same on every run.
      std::stable_sort(order.begin(), order.end(), [](const Tenant* a, const Tenant* b) {
        return a->vtime != b->vtime ? a->vtime < b->vtime : a->last_served < b->last_served;
      });
      for (Tenant* t : order) {
        for (std::deque<Entry>& jobs : t->jobs) visit(jobs);
      }
    }
    Forget();
    return taken;
  }

  // `taken` (from Visit) ran for `actual_ns`: its tenant's charge becomes that.
  void Finish(const Entry& taken, uint64_t actual_ns) {
    auto it = tenants_.find(taken.job_class.tenant);
    if (it == tenants_.end()) return;
    Tenant& t = it->second;
    t.vtime += (double(actual_ns) - double(taken.estimate_ns)) / t.weight;
    if (t.running > 0) --t.running;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Jobs of `tenant` waiting now.
  size_t queued(std::string_view tenant) const {
    auto it = tenants_.find(tenant);
    return it != tenants_.end() ? it->second.queued : 0;
  }
  // Tenants with jobs waiting or running.
  size_t active_tenants() const {
    size_t n = 0;
    for (const auto& [name, t] : tenants_) n += (t.queued > 0 || t.running > 0) ? 1 : 0;
    return n;
  }
  // The tenant's virtual time in nanoseconds (GPU time / weight, plus where it started); for
  // tests.
  double virtual_time(std::string_view tenant) const {
    auto it = tenants_.find(tenant);
    return it != tenants_.end() ? it->second.vtime : vnow_;
  }
  const FairQueueOptions& options() const { return options_; }

 private:
  struct Tenant {
    std::deque<Entry> jobs[2];  // by Priority; empty under kFifo (fifo_ holds every job)
    size_t queued = 0, running = 0;
    double weight = 1;
    double vtime = 0;          // nanoseconds of GPU time / weight
    uint64_t last_served = 0;  // ties go to the tenant served longest ago
  };

  void Charge(Tenant& t, uint64_t estimate_ns) {
    vnow_ = std::max(vnow_, t.vtime);
    t.vtime += double(estimate_ns) / t.weight;
    t.last_served = ++served_;
    ++t.running;
  }

  // Drops the state of idle tenants that are not ahead of the others: coming back, they would
  // start at vnow_ anyway. One that is ahead is kept, so that leaving and coming back does not
  // wipe out what it took.
  void Forget() {
    for (auto it = tenants_.begin(); it != tenants_.end();) {
      const Tenant& t = it->second;
      if (t.queued == 0 && t.running == 0 && t.vtime <= vnow_) {
        it = tenants_.erase(it);
      } else {
        ++it;
      }
    }
  }

  const FairQueueOptions options_;
  std::map<std::string, Tenant, std::less<>> tenants_;
  std::deque<Entry> fifo_;
  size_t size_ = 0;
  uint64_t served_ = 0;
  double vnow_ = 0;  // the virtual start time of the job taken last
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_WORKER_FAIR_QUEUE_H_
