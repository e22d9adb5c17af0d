// A few host threads for CPU work that must not hold up the GPU worker or gRPC's threads:
// decoding images (uploaded or inline), encoding PNG results, streaming results out.
#ifndef GLIMPSE_SERVER_WORKER_HOST_POOL_H_
#define GLIMPSE_SERVER_WORKER_HOST_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

namespace glimpse::server {

// The CPUs this process may run on: its affinity mask, under its cgroup's CPU quota if any
// (cgroup v2 cpu.max, else v1 cpu.cfs_quota_us), as a container's CPU limit sets it. At least 1.
int UsableCpus();

// Threads of the service's host pool, which decodes inline and uploaded images in parallel: one per
// usable CPU, at least 4, so that streaming results out keeps threads while images decode.
int DecoderThreads();

// Threads for host work, tasks run in the order posted. Example:
//   HostPool pool(DecoderThreads(), /*nice=*/10);
//   pool.Post([&] { Decode(bytes); });
class HostPool {
 public:
  // `nice`: the threads' nice value (0-19; Linux sets it per thread). Above 0, the threads that
  // feed the GPU and answer calls (the GL thread, a CPU renderer's threads, gRPC's) preempt them
  // where they share a CPU, instead of waiting behind a decode. Returns once every thread is named
  // and at its nice value.
  explicit HostPool(int threads, int nice = 0);
  // Runs every task already posted, then joins the threads.
  ~HostPool();
  HostPool(const HostPool&) = delete;
  HostPool& operator=(const HostPool&) = delete;

  void Post(std::function<void()> task);

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::latch started_;  // counted down by each thread once named and at its nice value
  std::vector<std::thread> threads_;
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_WORKER_HOST_POOL_H_
