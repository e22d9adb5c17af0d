// Splitting the kernels' WarmUp() between threads that each own a Context on the same device.
//
// A warm-up is a fixed sequence of units (a kernel's dispatches for one sample type and channel
// count, or one program): every thread walks the same sequence in the same order and calls
// Claim() at each unit; a unit runs on the one thread whose Claim() returned true for it. Claims
// are taken in turn from one counter, so a thread that finishes a unit early takes the next free
// one (the costly units come first in each kernel's sequence).
//
//   std::atomic<int> next{0};  // shared by the threads of the split, each with its own Context
//   // On each of them:
//   HistogramKernel kernel(*ctx);
//   WarmUpShare share(&next);
//   if (absl::Status s = kernel.WarmUp(share); !s.ok()) return s;
//   // Inside a kernel's WarmUp(share), at each unit of its fixed sequence:
//   if (share.Claim()) RunUnit();  // else another thread runs this one
#ifndef GLIMPSE_GPU_WARM_UP_H_
#define GLIMPSE_GPU_WARM_UP_H_

#include <atomic>

namespace glimpse::gpu {

// One thread's share. Not itself thread-safe: each thread has its own, over a shared counter.
class WarmUpShare {
 public:
  // Every unit: one thread warms up alone.
  WarmUpShare() = default;
  // The units this thread claims from `next`, the counter that every thread of the split shares
  // (starting at 0; it must outlive the share).
  explicit WarmUpShare(std::atomic<int>* next) : next_(next) {}

  // Called at each unit in sequence: true if this thread runs it.
  bool Claim() {
    const int unit = index_++;
    if (next_ == nullptr) {
      ++claimed_;
      return true;
    }
    // The counter only grows, so the unit claimed next is never one already walked past.
    if (held_ < unit) held_ = next_->fetch_add(1, std::memory_order_relaxed);
    if (held_ != unit) return false;
    ++claimed_;
    return true;
  }
  int units_seen() const { return index_; }
  int units_claimed() const { return claimed_; }

 private:
  std::atomic<int>* next_ = nullptr;
  int index_ = 0;    // the next unit's place in the sequence
  int held_ = -1;    // the unit this thread has claimed and not yet reached or run
  int claimed_ = 0;  // units this thread has run
};

}  // namespace glimpse::gpu

#endif  // GLIMPSE_GPU_WARM_UP_H_
