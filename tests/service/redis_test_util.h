// A real redis-server for the tests that share one between replicas: started on a free loopback
// port in a fresh directory, without persistence.
#ifndef GLIMPSE_TESTS_SERVICE_REDIS_TEST_UTIL_H_
#define GLIMPSE_TESTS_SERVICE_REDIS_TEST_UTIL_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tests/service/process_util.h"

namespace glimpse::testing {

inline constexpr char kRedisServer[] = "/usr/bin/redis-server";

// A fresh directory for one fixture's redis-server (and its log): /tmp/PREFIX-PID-RANDOM.
inline std::filesystem::path ScratchDir(const std::string& prefix) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      (prefix + "-" + std::to_string(getpid()) + "-" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  return dir;
}

// No persistence: a restarted Redis is empty, the harder case for recovery.
inline std::unique_ptr<Child> StartRedis(int port, const std::string& dir) {
  return std::make_unique<Child>(
      std::vector<std::string>{kRedisServer, "--port", std::to_string(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no", "--dir", dir},
      dir + "/redis.log");
}

// True once something accepts connections on 127.0.0.1:port.
inline bool RedisAnswers(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

}  // namespace glimpse::testing

#endif  // GLIMPSE_TESTS_SERVICE_REDIS_TEST_UTIL_H_
