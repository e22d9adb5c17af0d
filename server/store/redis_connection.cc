// The shared image store's connection pool: connecting (with AUTH), reusing idle connections,
// and the health loop that pings Redis every second and reports when it comes and goes.
#include "server/store/redis_connection.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "common/str.h"
#include "server/rpc/status_util.h"
#include "server/store/redis_store.h"

namespace glimpse::server {

RedisStore::RedisStore(const RedisOptions& options) : options_(options), pool_(options.threads) {}

absl::StatusOr<std::unique_ptr<RedisStore>> RedisStore::Create(const RedisOptions& options) {
  const size_t colon = options.address.rfind(':');
  int port = 0;
  if (colon != std::string::npos && colon > 0) {
    const std::string p = options.address.substr(colon + 1);
    char* end = nullptr;
    const long v = std::strtol(p.c_str(), &end, 10);
    if (!p.empty() && *end == '\0' && v > 0 && v < 65536) port = int(v);
  }
  if (port == 0) {
    return absl::InvalidArgumentError(StrCat(
        "--redis must be HOST:PORT with a port in [1, 65535], got \"", options.address, "\""));
  }
  std::unique_ptr<RedisStore> s(new RedisStore(options));
  s->host_ = options.address.substr(0, colon);
  if (s->host_.size() > 2 && s->host_.front() == '[' && s->host_.back() == ']') {
    s->host_ = s->host_.substr(1, s->host_.size() - 2);
  }
  s->port_ = port;
  s->health_ = std::thread([p = s.get()] { p->HealthLoop(); });
  return s;
}

RedisStore::~RedisStore() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (health_.joinable()) health_.join();
}

absl::Status RedisStore::Unavailable(const std::string& what) const {
  return absl::UnavailableError(StrCat("the shared image store (Redis at ", options_.address,
                                       ") is unavailable: ", what, "; retry later"));
}

void RedisStore::SetOnHealth(std::function<void(bool)> on_health) {
  std::lock_guard lock(mu_);
  on_health_ = std::move(on_health);
  on_health_(reachable_.load());
}

void RedisStore::Observe(bool ok) {
  if (reachable_.exchange(ok) == ok) return;
  if (ok) {
    spdlog::info("shared image store: Redis at {} reachable", options_.address);
  } else {
    spdlog::warn("shared image store: Redis at {} unreachable", options_.address);
  }
  std::function<void(bool)> f;
  {
    std::lock_guard lock(mu_);
    f = on_health_;
  }
  if (f) f(ok);
}

void RedisStore::HealthLoop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    (void)Ping();
    lock.lock();
    cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stopping_; });
  }
}

absl::StatusOr<std::unique_ptr<RedisStore::Connection>> RedisStore::Take() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Connection> c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
  }
  redisContext* raw = redisConnectWithTimeout(host_.c_str(), port_, ToTimeval(options_.timeout));
  if (raw == nullptr) return Unavailable("cannot allocate a connection");
  auto c = std::make_unique<Connection>(raw);
  if (raw->err != 0) {
    Observe(false);
    return Unavailable(StrCat("cannot connect: ", raw->errstr));
  }
  redisSetTimeout(raw, ToTimeval(options_.timeout));
  redisEnableKeepAlive(raw);
  if (!options_.password.empty()) {
    std::vector<std::string_view> auth = {"AUTH"};
    if (!options_.user.empty()) auth.push_back(options_.user);
    auth.push_back(options_.password);
    absl::StatusOr<std::vector<Reply>> r = c->Run({auth});
    if (!r.ok()) {
      Observe(false);
      return Unavailable(StrCat("authentication failed: ", MessageOf(r.status())));
    }
  }
  return c;
}

void RedisStore::Give(std::unique_ptr<Connection> c) {
  std::lock_guard lock(mu_);
  if (idle_.size() < size_t(options_.threads) + 2) idle_.push_back(std::move(c));
}

absl::Status RedisStore::Ping() {
  GLIMPSE_REDIS_RUN(r, Commands{{"PING"}});
  return absl::OkStatus();
}

}  // namespace glimpse::server
