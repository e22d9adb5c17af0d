#include "gpu/internal/driver_threads.h"

#include <dirent.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <thread>

namespace glimpse::gpu {
namespace {

std::vector<pid_t> ProcessThreads() {
  std::vector<pid_t> tids;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return tids;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') tids.push_back(pid_t(std::atol(e->d_name)));
  }
  closedir(dir);
  std::sort(tids.begin(), tids.end());
  return tids;
}

// One of /proc's files about a thread of this process.
std::ifstream TaskFile(pid_t tid, std::string_view file) {
  return std::ifstream("/proc/self/task/" + std::to_string(tid) + "/" + std::string(file));
}

// The threads inside a DriverThreadCapture right now: named kDriverThreadName themselves, and
// perhaps started after another capture began, so never taken for a driver's thread.
std::mutex g_capturing_mu;
std::set<pid_t> g_capturing;

// A field of a thread's /proc status ("Name:" lines), without the blanks before it; nullopt if
// the thread has exited or the kernel shows no such field.
std::optional<std::string> StatusField(pid_t tid, std::string_view name) {
  std::ifstream status = TaskFile(tid, "status");
  for (std::string line; std::getline(status, line);) {
    if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 &&
        line[name.size()] == ':') {
      const size_t start = line.find_first_not_of(" \t", name.size() + 1);
      return start == std::string::npos ? "" : line.substr(start);
    }
  }
  return std::nullopt;
}

// Whether a thread has blocked at least once (voluntary_ctxt_switches), or has exited.
bool HasBlocked(pid_t tid) {
  const std::optional<std::string> switches = StatusField(tid, "voluntary_ctxt_switches");
  return !switches || std::atol(switches->c_str()) > 0;  // no such field: nothing to wait for
}

// Whether a thread is parked: asleep in a futex wait, where a driver's threads wait for work once
// started (llvmpipe's workers and rasterizer threads, Mesa's disk-cache thread: a condition
// variable each). Having blocked once is not enough: a thread still in its start-up code, before
// it names itself, blocks too, for the process's memory map lock (an allocation's mmap, a page
// fault) while its siblings are started. Where /proc does not show the thread's system call,
// having blocked once is all there is to go by.
bool Parked(pid_t tid) {
  std::ifstream in = TaskFile(tid, "syscall");
  std::string nr, word, op;
  if (!(in >> nr)) return HasBlocked(tid);  // exited too
  // "running", or another system call: not parked.
  if (nr != std::to_string(SYS_futex) || !(in >> word >> op)) return false;
  const unsigned long cmd = std::strtoul(op.c_str(), nullptr, 16) & FUTEX_CMD_MASK;
  return cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET;
}

std::string ThreadName(pid_t tid) {
  std::string name;
  TaskFile(tid, "comm") >> name;
  return name;
}

}  // namespace

DriverThreadCapture::DriverThreadCapture() : before_(ProcessThreads()) {
  {
    std::lock_guard lock(g_capturing_mu);
    g_capturing.insert(gettid());
  }
  char name[64] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) == 0) {
    name_ = name;
    renamed_ = pthread_setname_np(pthread_self(), kDriverThreadName) == 0;
  }
}

DriverThreadCapture::~DriverThreadCapture() {
  if (renamed_) pthread_setname_np(pthread_self(), name_.c_str());
  std::lock_guard lock(g_capturing_mu);
  g_capturing.erase(gettid());
}

std::vector<pid_t> DriverThreadCapture::Started() const {
  std::vector<pid_t> started;
  if (!renamed_) return started;
  {
    std::lock_guard lock(g_capturing_mu);
    for (pid_t tid : ProcessThreads()) {
      if (!g_capturing.contains(tid) && !std::binary_search(before_.begin(), before_.end(), tid)) {
        started.push_back(tid);
      }
    }
  }
  // A thread that still carries the inherited name may not have finished starting, and may yet
  // name itself: wait until each such thread is parked (within microseconds of starting on an idle
  // machine; on a loaded one, up to seconds), and leave out one that never parks. A thread with
  // another name has named itself, or was started by another thread: nothing to wait for.
  const auto inherited = [](pid_t tid) { return ThreadName(tid) == kDriverThreadName; };
  const auto settled = [&](pid_t tid) { return !inherited(tid) || Parked(tid); };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!std::all_of(started.begin(), started.end(), settled) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::erase_if(started, [&](pid_t tid) { return !inherited(tid) || !Parked(tid); });
  return started;
}

std::vector<PinnedThread> PinOnePerCpu(const std::vector<pid_t>& threads) {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return {};
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mask)) cpus.push_back(cpu);
  }
  // Fewer threads than CPUs: pinned, they could not move to CPUs that other work leaves idle.
  if (cpus.size() < 2 || threads.size() < cpus.size()) return {};
  std::vector<PinnedThread> pinned;
  for (size_t i = 0; i < threads.size(); ++i) {
    const int cpu = cpus[i % cpus.size()];
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(threads[i], sizeof(one), &one) == 0) pinned.push_back({threads[i], cpu});
  }
  return pinned;
}

std::string ThreadCpus(pid_t tid) { return StatusField(tid, "Cpus_allowed_list").value_or(""); }

}  // namespace glimpse::gpu
