// The shared image store's connections to Redis (server/store/redis_store.h's private half): a
// hiredis synchronous context per connection with the store's timeout on every read and write,
// and GLIMPSE_REDIS_RUN, one round trip on a pooled connection. Included by server/store/redis_*.cc
// only.
//
//   GLIMPSE_REDIS_RUN(replies, Commands{{"GET", key}});  // in a RedisStore member returning Status
//   const redisReply* v = (*replies)[0].get();
#ifndef GLIMPSE_SERVER_STORE_REDIS_CONNECTION_H_
#define GLIMPSE_SERVER_STORE_REDIS_CONNECTION_H_

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/str.h"
#include "server/rpc/status_util.h"
#include "server/store/redis_store.h"

namespace glimpse::server {

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

using Commands = std::vector<std::vector<std::string_view>>;

inline timeval ToTimeval(std::chrono::milliseconds ms) {
  return timeval{.tv_sec = time_t(ms.count() / 1000),
                 .tv_usec = suseconds_t(ms.count() % 1000) * 1000};
}

// One connection: hiredis's synchronous context with the store's timeout on every read and write.
class RedisStore::Connection {
 public:
  explicit Connection(redisContext* c) : c_(c) {}
  ~Connection() { redisFree(c_); }
  redisContext* get() { return c_; }

  // Sends every command, then reads every reply (one round trip). An ERROR reply is an error.
  absl::StatusOr<std::vector<Reply>> Run(const std::vector<std::vector<std::string_view>>& cmds) {
    for (const std::vector<std::string_view>& cmd : cmds) {
      std::vector<const char*> argv;
      std::vector<size_t> lens;
      for (std::string_view a : cmd) {
        argv.push_back(a.data());
        lens.push_back(a.size());
      }
      if (redisAppendCommandArgv(c_, int(argv.size()), argv.data(), lens.data()) != REDIS_OK) {
        return absl::UnavailableError(c_->errstr);
      }
    }
    std::vector<Reply> replies;
    for (size_t i = 0; i < cmds.size(); ++i) {
      void* r = nullptr;
      if (redisGetReply(c_, &r) != REDIS_OK || r == nullptr) {
        return absl::UnavailableError(c_->err == REDIS_ERR_IO && errno == EAGAIN
                                          ? "no answer within --redis-timeout-ms"
                                          : std::string(c_->errstr));
      }
      replies.emplace_back(static_cast<redisReply*>(r));
      if (replies.back()->type == REDIS_REPLY_ERROR) {
        return absl::UnavailableError(
            StrCat("Redis refused ", cmd_name(cmds[i]), ": ", replies.back()->str));
      }
    }
    return replies;
  }

 private:
  static std::string cmd_name(const std::vector<std::string_view>& cmd) {
    return cmd.empty() ? "" : std::string(cmd[0]);
  }
  redisContext* c_;
};

// Runs one round trip on a pooled connection; a failed connection is dropped, not reused. For
// RedisStore members returning absl::Status or absl::StatusOr; declares `replies`.
#define GLIMPSE_REDIS_RUN(replies, ...)                                    \
  absl::StatusOr<std::unique_ptr<Connection>> conn_ = Take();              \
  if (!conn_.ok()) return conn_.status();                                  \
  absl::StatusOr<std::vector<Reply>> replies = (*conn_)->Run(__VA_ARGS__); \
  if (!replies.ok()) {                                                     \
    Observe(false);                                                        \
    return Unavailable(std::string(MessageOf(replies.status())));          \
  }                                                                        \
  Observe(true);                                                           \
  Give(std::move(*conn_))

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_STORE_REDIS_CONNECTION_H_
