// Processes, ports and waiting, for the service tests that run real server processes.
#ifndef GLIMPSE_TESTS_SERVICE_PROCESS_UTIL_H_
#define GLIMPSE_TESTS_SERVICE_PROCESS_UTIL_H_

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"

namespace glimpse::testing {

inline int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}

// The whole of a file (a child's log), empty if it cannot be read.
inline std::string FileText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A child process, killed (SIGKILL) when this goes away unless already stopped. Started with
// posix_spawn: between a fork and its exec the child of a multi-threaded process (the tests run
// servers, gRPC and the driver's threads) may only make async-signal-safe calls, and an
// allocation there can wait forever on a lock another thread held at the fork (sanitizer
// allocators take no fork precautions in Debian 12's toolchain); posix_spawn runs no code of ours
// in the child.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& log) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    spawn_error_ = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
    if (spawn_error_ != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() { Stop(SIGKILL); }
  // Sends `sig` and waits for the process to end.
  void Stop(int sig) {
    if (pid_ <= 0) return;
    kill(pid_, sig);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  void Signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  // For a failure message: the pid, the program it runs and its state in /proc ("exited" once
  // reaped, or why it could not be started).
  std::string Describe() const {
    if (spawn_error_ != 0) return std::string("not started: ") + std::strerror(spawn_error_);
    if (pid_ <= 0) return "exited";
    const std::string proc = "/proc/" + std::to_string(pid_);
    std::string cmdline = FileText(proc + "/cmdline");
    cmdline = cmdline.substr(0, cmdline.find('\0'));
    const std::string stat = FileText(proc + "/stat");
    const size_t paren = stat.rfind(')');
    return "pid " + std::to_string(pid_) + " runs " + cmdline + ", state " +
           (paren == std::string::npos ? "?" : stat.substr(paren + 2, 1)) + ", waiting in " +
           FileText(proc + "/wchan");
  }
  // Whether it is still running; one that has exited is reaped, and Stop is then a no-op.
  bool running() {
    if (pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == pid_) pid_ = -1;
    return pid_ > 0;
  }
  // The exit status (128 + signal if killed by one), once it has exited within `tries` * 50 ms;
  // -1 if it is still running then.
  int Exited(int tries = 200) {
    int status = 0;
    for (int i = 0; i < tries && pid_ > 0; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  int spawn_error_ = 0;  // posix_spawn's error number (the exec's included), 0 once started
};

// Sets (or with nullptr unsets) an environment variable for this scope, for the code under test
// and the children it starts; restores what was there before.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    Set(value);
  }
  ~ScopedEnv() { Set(old_ ? old_->c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void Set(const char* value) {
    if (value != nullptr) {
      ::setenv(name_.c_str(), value, 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// Waits until `f` holds, for up to `tries` * 50 ms (10 s by default).
template <typename F>
bool Eventually(F f, int tries = 200) {
  for (int i = 0; i < tries; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

inline bool Serving(const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  return health->Check(&ctx, req, &resp).ok() &&
         resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

// Waits until the server process `child` answers SERVING for the whole server at `target`, for up
// to `timeout`: a sanitizer build sharing two cores with other tests can take many seconds to open
// its GL context. Each try has a fresh channel, since one channel's reconnect backoff (1 s growing
// to minutes) could let the wait end before it tries again. False at once if the process exits.
inline bool ServesWithin(Child& child, const std::string& target,
                         std::chrono::seconds timeout = std::chrono::seconds(120)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (!child.running()) return false;
    if (Serving(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()), "")) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace glimpse::testing

#endif  // GLIMPSE_TESTS_SERVICE_PROCESS_UTIL_H_
