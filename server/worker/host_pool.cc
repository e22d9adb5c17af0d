#include "server/worker/host_pool.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

namespace glimpse::server {

int UsableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cpus = sched_getaffinity(0, sizeof(set), &set) == 0
                 ? CPU_COUNT(&set)
                 : static_cast<int>(std::thread::hardware_concurrency());
  double quota = -1, period = 0;
  if (std::ifstream v2("/sys/fs/cgroup/cpu.max"); v2) {
    std::string q;
    if (v2 >> q >> period && q != "max") quota = std::atof(q.c_str());
  } else {
    std::ifstream("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") >> quota;
    std::ifstream("/sys/fs/cgroup/cpu/cpu.cfs_period_us") >> period;
  }
  if (quota > 0 && period > 0) cpus = std::min(cpus, static_cast<int>(std::ceil(quota / period)));
  return std::max(cpus, 1);
}

int DecoderThreads() { return std::max(4, UsableCpus()); }

HostPool::HostPool(int threads, int nice) : started_(threads) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this, nice] {
      pthread_setname_np(pthread_self(), "glimpse-host");  // for top -H and profilers
      // Per thread on Linux (PRIO_PROCESS of a thread id). Raising one's own nice value needs no
      // privilege, so this cannot fail for 0-19.
      if (nice != 0) setpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid)), nice);
      started_.count_down();
      Loop();
    });
  }
  started_.wait();
}

HostPool::~HostPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void HostPool::Post(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void HostPool::Loop() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace glimpse::server
