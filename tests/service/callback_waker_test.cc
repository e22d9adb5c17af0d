// CallbackWaker (server/rpc/callback_waker.h): its calls' callbacks run at the period asked, and
// it stops cleanly, also while a call is in flight. What it is for, calls after idle gaps
// answered without gRPC's 100 ms sleeps, is measured by bench/idle_gaps.py.
#include "server/rpc/callback_waker.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace glimpse::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(CallbackWakerTest, WakesAtItsPeriod) {
  server::CallbackWaker waker(milliseconds(50));
  const auto t0 = steady_clock::now();
  while (waker.wakes() < 6 && steady_clock::now() - t0 < std::chrono::seconds(10)) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  const auto took = steady_clock::now() - t0;
  ASSERT_GE(waker.wakes(), 6u) << "after 10 s";
  // Six callbacks of a 50 ms period need at least five periods.
  EXPECT_GE(took, milliseconds(5 * 50 - 10));
}

TEST(CallbackWakerTest, StopsAtOnceWithACallInFlight) {
  for (int i = 0; i < 20; ++i) {
    const auto t0 = steady_clock::now();
    { server::CallbackWaker waker(milliseconds(250)); }  // the first call goes out at once
    EXPECT_LT(steady_clock::now() - t0, std::chrono::seconds(5));
  }
}

}  // namespace
}  // namespace glimpse::testing
