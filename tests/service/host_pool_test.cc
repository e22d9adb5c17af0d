// The service's host threads: tasks run on threads of the pool's nice value, which the GL thread
// and gRPC's threads (nice 0) preempt (ServiceLimits::host_nice, --host-nice).
#include "server/worker/host_pool.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "tests/service/service_test_util.h"

namespace glimpse::testing {
namespace {

// The nice value of the calling thread (Linux: per thread).
int OwnNice() {
  errno = 0;
  return getpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid)));
}

// The nice values seen by `tasks` tasks posted to a pool of `threads` threads at `nice`.
std::vector<int> NicesSeen(int threads, int nice, int tasks) {
  std::vector<std::promise<int>> seen(static_cast<size_t>(tasks));
  {
    server::HostPool pool(threads, nice);
    for (auto& p : seen) pool.Post([&p] { p.set_value(OwnNice()); });
  }  // runs every task, then joins
  std::vector<int> out;
  for (auto& p : seen) out.push_back(p.get_future().get());
  return out;
}

TEST(HostPoolTest, TasksRunAtThePoolsNiceValue) {
  const int caller = OwnNice();
  EXPECT_EQ(NicesSeen(3, 7, 12), std::vector<int>(12, 7));
  EXPECT_EQ(NicesSeen(2, 19, 4), std::vector<int>(4, 19));
  // 0 leaves the threads as they start: at the nice value of the thread that made the pool.
  EXPECT_EQ(NicesSeen(2, 0, 4), std::vector<int>(4, caller));
  EXPECT_EQ(OwnNice(), caller) << "the pool's nice value leaked into the caller";
}

// A server's decoding threads run at --host-nice: as many threads at an otherwise unused value as
// the service's pool has.
TEST(HostPoolTest, TheServicesDecodersRunAtHostNice) {
  server::ServerOptions o;
  o.limits.host_nice = 13;
  std::unique_ptr<TestServer> ts = TestServer::Start(o);
  GLIMPSE_REQUIRE_SERVER(ts);
  int at_13 = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    errno = 0;
    const int nice = getpriority(PRIO_PROCESS, id_t(std::stol(task.path().filename())));
    if (name == "glimpse-host" && nice == 13) ++at_13;
  }
  EXPECT_EQ(at_13, server::DecoderThreads());
}

}  // namespace
}  // namespace glimpse::testing
