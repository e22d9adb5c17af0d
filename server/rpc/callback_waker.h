// Keeps gRPC's callback threads from sleeping between calls.
//
// The server's handlers are gRPC callback reactors. In the gRPC C++ library Debian ships (1.51,
// without a background poller), every callback-API event is run by a few "nexting" threads that
// wait for the next event for at most a second and, when none came, sleep 100 ms before waiting
// again (src/cpp/common/completion_queue_cc.cc). A call that arrives while all of them sleep waits
// for the sleep to end before the server sees it: calls sent 1.0 s after the previous answer took
// about 100 ms more than others (bench/results/idle_gaps_llvmpipe.md). A CallbackWaker puts an
// event on that queue every `period`: a call on a channel with no address, failed at once by gRPC,
// whose callback runs on one of those threads, so the thread that ran the latest one is always
// waiting.
//
//   CallbackWaker waker;  // from start-up to shutdown
//   ...
//   waker.wakes();        // callbacks run so far
#ifndef GLIMPSE_SERVER_RPC_CALLBACK_WAKER_H_
#define GLIMPSE_SERVER_RPC_CALLBACK_WAKER_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

namespace glimpse::server {

class CallbackWaker {
 public:
  // Well under the threads' one-second wait.
  static constexpr std::chrono::milliseconds kDefaultPeriod{250};

  explicit CallbackWaker(std::chrono::milliseconds period = kDefaultPeriod);
  // Stops, and waits for the callback of the last call made.
  ~CallbackWaker();
  CallbackWaker(const CallbackWaker&) = delete;
  CallbackWaker& operator=(const CallbackWaker&) = delete;

  // Callbacks run so far.
  uint64_t wakes() const;

 private:
  struct State {
    mutable std::mutex mu;
    std::condition_variable cv;
    bool stopping = false;
    bool in_flight = false;
    uint64_t wakes = 0;
  };
  void Loop();

  const std::chrono::milliseconds period_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;
  std::thread thread_;
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_RPC_CALLBACK_WAKER_H_
