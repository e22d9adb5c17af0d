// The worker threads a CPU renderer starts, and pinning them one per CPU.
//
// llvmpipe runs compute dispatches on a pool of worker threads (LP_NUM_THREADS of them) that it
// starts in eglInitialize and wakes for every dispatch. Left to the Linux scheduler, two workers
// woken together are at times queued on the same CPU while another CPU idles, and the next
// wake-ups keep them there (each is woken on the CPU it last ran on): measured on a 2-core
// machine, whole runs of calls at half speed, at random from one process or stretch of calls to
// the next (bench/results/peers_llvmpipe.md). Pinning each worker to its own CPU of the
// process's affinity mask keeps every dispatch on all the cores.
// Mesa starts one worker per online CPU unless LP_NUM_THREADS says otherwise.
#ifndef GLIMPSE_GPU_INTERNAL_DRIVER_THREADS_H_
#define GLIMPSE_GPU_INTERNAL_DRIVER_THREADS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace glimpse::gpu {

// The name the threads started by the driver inside a DriverThreadCapture carry (those that do
// not rename themselves), in `ps -L` and /proc.
inline constexpr char kDriverThreadName[] = "gl-driver";

// Finds the threads a driver call starts on the calling thread: while it lives, the calling
// thread is named kDriverThreadName, which the threads it starts inherit.
// REQUIRES: constructed and destroyed on the same thread.
class DriverThreadCapture {
 public:
  DriverThreadCapture();
  ~DriverThreadCapture();  // gives the calling thread its name back
  DriverThreadCapture(const DriverThreadCapture&) = delete;
  DriverThreadCapture& operator=(const DriverThreadCapture&) = delete;

  // The threads started since construction that carry kDriverThreadName once they have started
  // and wait for work (those that name themselves are left out), by tid. Waits up to 10 s for
  // them to get there; one that has not is left out.
  std::vector<pid_t> Started() const;

 private:
  std::vector<pid_t> before_;
  std::string name_;  // the calling thread's own name
  bool renamed_ = false;
};

struct PinnedThread {
  pid_t tid = 0;
  int cpu = 0;
};

// Pins threads[i] to the i-th CPU of the calling thread's affinity mask (round robin when there
// are more threads than CPUs), when there are threads for every CPU: as llvmpipe's workers take
// the work of a dispatch from one queue, one on each CPU loses nothing by staying there. Returns
// those pinned: none when the mask has one CPU (nothing to spread) or more CPUs than threads
// (pinned, they could not move to the CPUs other work leaves idle); a thread that has exited is
// left out.
std::vector<PinnedThread> PinOnePerCpu(const std::vector<pid_t>& threads);

// The CPUs a thread of this process may run on, from /proc (Cpus_allowed_list), "" if unknown.
std::string ThreadCpus(pid_t tid);

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_INTERNAL_DRIVER_THREADS_H_
