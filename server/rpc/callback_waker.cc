#include "server/rpc/callback_waker.h"

#include <pthread.h>

#include <string>

namespace glimpse::server {
namespace {

// A call in flight: what gRPC reads and writes until the callback runs.
struct WakeCall {
  grpc::ClientContext context;
  grpc::ByteBuffer request, response;
};

}  // namespace

CallbackWaker::CallbackWaker(std::chrono::milliseconds period)
    : period_(period),
      // "unix:" with no path resolves to no address: calls fail at once (UNAVAILABLE), with no
      // connection attempt, lookup or log line.
      channel_(grpc::CreateChannel("unix:", grpc::InsecureChannelCredentials())),
      stub_(std::make_unique<grpc::GenericStub>(channel_)) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "glimpse-waker");
    Loop();
  });
}

CallbackWaker::~CallbackWaker() {
  std::unique_lock lock(state_->mu);
  state_->stopping = true;
  state_->cv.notify_all();
  lock.unlock();
  thread_.join();
  lock.lock();
  state_->cv.wait(lock, [&] { return !state_->in_flight; });
}

uint64_t CallbackWaker::wakes() const {
  std::lock_guard lock(state_->mu);
  return state_->wakes;
}

void CallbackWaker::Loop() {
  std::unique_lock lock(state_->mu);
  while (!state_->stopping) {
    if (!state_->in_flight) {
      state_->in_flight = true;
      lock.unlock();
      auto* call = new WakeCall;
      call->context.set_deadline(std::chrono::system_clock::now() + period_);
      grpc::Slice empty{std::string()};
      call->request = grpc::ByteBuffer(&empty, 1);
      stub_->UnaryCall(&call->context, "/glimpse.internal.Waker/Wake", grpc::StubOptions(),
                       &call->request, &call->response,
                       [call, state = state_](const grpc::Status&) {
                         delete call;
                         std::lock_guard done(state->mu);
                         state->in_flight = false;
                         ++state->wakes;
                         state->cv.notify_all();
                       });
      lock.lock();
    }
    state_->cv.wait_for(lock, period_, [&] { return state_->stopping; });
  }
}

}  // namespace glimpse::server
