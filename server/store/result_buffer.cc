#include "server/store/result_buffer.h"

#include <algorithm>
#include <utility>

namespace glimpse::server {

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    budget_ = std::exchange(other.budget_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void Lease::ShrinkTo(uint64_t bytes) {
  if (budget_ == nullptr || bytes >= bytes_) return;
  budget_->Give(bytes_ - bytes);
  bytes_ = bytes;
}

void Lease::Release() {
  if (budget_ != nullptr && bytes_ > 0) budget_->Give(bytes_);
  budget_ = nullptr;
  bytes_ = 0;
}

std::optional<Lease> ResultBuffer::TryAcquire(uint64_t bytes) {
  std::lock_guard lock(mu_);
  if (bytes > budget_ - std::min(used_, budget_)) return std::nullopt;
  used_ += bytes;
  peak_ = std::max(peak_, used_);
  return Lease(this, bytes);
}

void ResultBuffer::SetOnRelease(std::function<void()> on_release) {
  std::lock_guard lock(mu_);
  on_release_ = std::move(on_release);
}

ResultBufferUsage ResultBuffer::Usage() const {
  std::lock_guard lock(mu_);
  return {.budget = budget_, .used = used_, .peak = peak_};
}

void ResultBuffer::Give(uint64_t bytes) {
  std::function<void()> notify;
  {
    std::lock_guard lock(mu_);
    used_ -= std::min(used_, bytes);
    notify = on_release_;
  }
  if (notify) notify();
}

}  // namespace glimpse::server
