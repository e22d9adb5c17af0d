#include "server/store/redis_store.h"

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>
#include <sys/time.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "common/str.h"
#include "glimpse/v1/image_analytics.pb.h"
#include "server/rpc/status_util.h"
#include "server/store/redis_connection.h"

namespace glimpse::server {
namespace {

using SystemClock = std::chrono::system_clock;

constexpr char kKeyPrefix[] = "glimpse:image:";
constexpr char kTenantPrefix[] = "glimpse:tenant:";
// Chunks written (or read) per round trip: bounds the memory hiredis buffers at once.
constexpr int kChunksPerTrip = 4;

// The keys of a tenant's images: the owner is part of the key, so a look-up as another tenant
// finds no key at all (nothing to compare, nothing renewed) and a tenant's SCAN sees its own
// keys only. Without access control (tenant "") the keys are what they always were. Tenant names
// hold no ':' and no glob character (server/access/access.h), so no prefix can match another
// tenant's.
std::string Prefix(const std::string& tenant) {
  return tenant.empty() ? std::string(kKeyPrefix) : StrCat(kTenantPrefix, tenant, ":image:");
}

std::string Key(const std::string& id, const std::string& tenant) { return Prefix(tenant) + id; }

int64_t UnixMs(SystemClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

std::string SerializeMeta(const StoredImageInfo& s) {
  v1::ImageInfo info;
  info.set_image_id(s.id);
  info.set_width(uint32_t(s.desc.width));
  info.set_height(uint32_t(s.desc.height));
  info.set_channels(uint32_t(s.desc.channels));
  info.set_format(s.desc.type == gpu::SampleType::kUint8    ? v1::SAMPLE_FORMAT_UINT8
                  : s.desc.type == gpu::SampleType::kUint16 ? v1::SAMPLE_FORMAT_UINT16
                                                            : v1::SAMPLE_FORMAT_FLOAT32);
  info.set_bytes(s.desc.bytes());
  info.set_label(s.label);
  info.set_origin(s.origin);
  info.set_created_unix_ms(UnixMs(s.created));
  return info.SerializeAsString();
}

// `meta` and `chunk_bytes` as HMGET returns them; NOT_FOUND when absent.
absl::StatusOr<std::pair<StoredImageInfo, uint64_t>> ParseMeta(const redisReply* r,
                                                               const std::string& id,
                                                               const std::string& tenant) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
      r->element[0]->type != REDIS_REPLY_STRING) {
    return ImageStore::NotFound(id);
  }
  v1::ImageInfo info;
  const redisReply* c = r->element[1];
  const uint64_t chunk_bytes = c->type == REDIS_REPLY_STRING
                                   ? std::strtoull(std::string(c->str, c->len).c_str(), nullptr, 10)
                                   : 0;
  if (!info.ParseFromArray(r->element[0]->str, int(r->element[0]->len)) || info.image_id() != id ||
      chunk_bytes == 0) {
    return absl::DataLossError(StrCat("the shared image store holds a corrupt entry for ", id));
  }
  StoredImageInfo s;
  s.id = id;
  s.tenant = tenant;
  s.desc.width = int(info.width());
  s.desc.height = int(info.height());
  s.desc.channels = int(info.channels());
  s.desc.type = info.format() == v1::SAMPLE_FORMAT_UINT8    ? gpu::SampleType::kUint8
                : info.format() == v1::SAMPLE_FORMAT_UINT16 ? gpu::SampleType::kUint16
                                                            : gpu::SampleType::kFloat32;
  s.bytes = info.bytes();
  s.label = info.label();
  s.origin = info.origin();
  s.created = SystemClock::time_point(std::chrono::milliseconds(info.created_unix_ms()));
  return std::make_pair(std::move(s), chunk_bytes);
}

constexpr char kRatePrefix[] = "glimpse:rate:";

// The token bucket, atomic in Redis: the refill since the last take (Redis's own TIME, so the
// replicas' clocks do not matter), one token taken if there is one, and an expiry once the
// bucket would be full again (a missing key is a full bucket). KEYS[1]: the bucket; ARGV: rate
// (tokens/s), burst, expiry (ms). Returns 1 if a token was taken, else 0.
constexpr char kTakeTokenScript[] = R"lua(
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(b[1])
local at = tonumber(b[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
if now > at then
  tokens = math.min(burst, tokens + (now - at) * rate / 1000000)
  at = now
end
local taken = 0
if tokens >= 1 then
  tokens = tokens - 1
  taken = 1
end
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', string.format('%.0f', at))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return taken
)lua";

}  // namespace

absl::StatusOr<bool> RedisStore::TakeRateToken(const std::string& tenant, double rate,
                                               double burst) {
  const std::string key = StrCat(kRatePrefix, tenant);
  const std::string r = fmt::format("{}", rate), b = fmt::format("{}", burst);
  // Time to refill from empty, plus a second: expiring earlier would forget a debt.
  const std::string ttl_ms = std::to_string(int64_t(std::ceil(burst / rate * 1000)) + 1000);
  GLIMPSE_REDIS_RUN(reply, Commands{{"EVAL", kTakeTokenScript, "1", key, r, b, ttl_ms}});
  const redisReply* v = (*reply)[0].get();
  if (v->type != REDIS_REPLY_INTEGER) {
    return Unavailable(StrCat("unexpected reply to the rate-limit script for tenant ", tenant));
  }
  return v->integer == 1;
}

absl::Status RedisStore::Put(const StoredImageInfo& meta, const gpu::HostImage& image) {
  const std::string key = Key(meta.id, meta.tenant);
  const std::string_view bytes(reinterpret_cast<const char*>(image.data.data()), image.data.size());
  const uint64_t chunk = options_.chunk_bytes;
  const uint64_t chunks = std::max<uint64_t>(1, (bytes.size() + chunk - 1) / chunk);
  absl::StatusOr<std::unique_ptr<Connection>> conn = Take();
  if (!conn.ok()) return conn.status();
  std::vector<std::string> names;
  for (uint64_t i = 0; i < chunks; ++i) names.push_back(StrCat("c", i));
  // A few chunks per round trip; the expiry is set with the first, so a writer that dies midway
  // leaves nothing that outlives the TTL.
  const std::string ttl_ms = std::to_string(std::max<int64_t>(options_.ttl.count(), 1) * 1000);
  for (uint64_t i = 0; i < chunks; i += kChunksPerTrip) {
    std::vector<std::vector<std::string_view>> cmds;
    for (uint64_t j = i; j < std::min<uint64_t>(chunks, i + kChunksPerTrip); ++j) {
      const uint64_t off = std::min<uint64_t>(j * chunk, bytes.size());
      cmds.push_back({"HSET", key, names[j], bytes.substr(off, chunk)});
    }
    if (i == 0 && options_.ttl.count() > 0) cmds.push_back({"PEXPIRE", key, ttl_ms});
    absl::StatusOr<std::vector<Reply>> r = (*conn)->Run(cmds);
    if (!r.ok()) {
      Observe(false);
      return Unavailable(StrCat("writing image ", meta.id, ": ", MessageOf(r.status())));
    }
  }
  const std::string m = SerializeMeta(meta);
  // The chunk size the pixels were cut with, so readers need not share the writer's setting.
  const std::string chunk_str = std::to_string(chunk);
  std::vector<std::vector<std::string_view>> last = {
      {"HSET", key, "chunk_bytes", chunk_str, "meta", m}};
  if (options_.ttl.count() > 0) last.push_back({"PEXPIRE", key, ttl_ms});
  absl::StatusOr<std::vector<Reply>> r = (*conn)->Run(last);
  if (!r.ok()) {
    Observe(false);
    return Unavailable(StrCat("writing image ", meta.id, ": ", MessageOf(r.status())));
  }
  Observe(true);
  Give(*std::move(conn));
  return absl::OkStatus();
}

StoredImageInfo RedisStore::Decorate(StoredImageInfo info, int64_t pttl_ms) const {
  const SystemClock::time_point now = SystemClock::now();
  info.last_used = info.created;
  if (options_.ttl.count() > 0 && pttl_ms >= 0) {
    info.expires = now + std::chrono::milliseconds(pttl_ms);
    info.last_used = std::max(info.created, info.expires - options_.ttl);
  }
  return info;
}

absl::StatusOr<StoredImageInfo> RedisStore::Touch(const std::string& id,
                                                  const std::string& tenant) {
  const std::string key = Key(id, tenant);
  const std::string ttl_ms = std::to_string(options_.ttl.count() * 1000);
  std::vector<std::vector<std::string_view>> cmds = {{"HMGET", key, "meta", "chunk_bytes"}};
  if (options_.ttl.count() > 0) cmds.push_back({"PEXPIRE", key, ttl_ms});
  GLIMPSE_REDIS_RUN(r, cmds);
  absl::StatusOr<std::pair<StoredImageInfo, uint64_t>> parsed =
      ParseMeta((*r)[0].get(), id, tenant);
  if (!parsed.ok()) return parsed.status();
  return Decorate(std::move(parsed->first), options_.ttl.count() * 1000);
}

absl::StatusOr<gpu::HostImage> RedisStore::Get(const StoredImageInfo& meta) {
  const std::string key = Key(meta.id, meta.tenant);
  absl::StatusOr<std::unique_ptr<Connection>> conn = Take();
  if (!conn.ok()) return conn.status();
  absl::StatusOr<std::vector<Reply>> m = (*conn)->Run({{"HMGET", key, "meta", "chunk_bytes"}});
  if (!m.ok()) {
    Observe(false);
    return Unavailable(StrCat("reading image ", meta.id, ": ", MessageOf(m.status())));
  }
  absl::StatusOr<std::pair<StoredImageInfo, uint64_t>> parsed =
      ParseMeta((*m)[0].get(), meta.id, meta.tenant);
  if (!parsed.ok()) return parsed.status();
  gpu::HostImage image;
  image.desc = parsed->first.desc;
  const uint64_t total = image.desc.bytes();
  const uint64_t chunk = parsed->second;
  const uint64_t chunks = std::max<uint64_t>(1, (total + chunk - 1) / chunk);
  image.data.resize(total);
  std::vector<std::string> names;
  for (uint64_t i = 0; i < chunks; ++i) names.push_back(StrCat("c", i));
  for (uint64_t i = 0; i < chunks; i += kChunksPerTrip) {
    std::vector<std::vector<std::string_view>> cmds;
    for (uint64_t j = i; j < std::min<uint64_t>(chunks, i + kChunksPerTrip); ++j) {
      cmds.push_back({"HGET", key, names[j]});
    }
    absl::StatusOr<std::vector<Reply>> r = (*conn)->Run(cmds);
    if (!r.ok()) {
      Observe(false);
      return Unavailable(StrCat("reading image ", meta.id, ": ", MessageOf(r.status())));
    }
    for (size_t k = 0; k < r->size(); ++k) {
      const uint64_t j = i + k;
      const uint64_t off = std::min<uint64_t>(j * chunk, total);
      const uint64_t want = std::min<uint64_t>(chunk, total - off);
      const redisReply* c = (*r)[k].get();
      if (c->type != REDIS_REPLY_STRING || uint64_t(c->len) != want) {
        // Expired or evicted between the reads.
        return ImageStore::NotFound(meta.id);
      }
      std::memcpy(image.data.data() + off, c->str, want);
    }
  }
  Observe(true);
  Give(*std::move(conn));
  return image;
}

absl::Status RedisStore::Delete(const std::string& id, const std::string& tenant) {
  const std::string key = Key(id, tenant);
  GLIMPSE_REDIS_RUN(r, Commands{{"DEL", key}});
  if ((*r)[0]->type != REDIS_REPLY_INTEGER || (*r)[0]->integer == 0) {
    return ImageStore::NotFound(id);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<StoredImageInfo>> RedisStore::List(const std::string& tenant) {
  std::vector<std::string> keys;
  std::string cursor = "0";
  const std::string prefix = Prefix(tenant);
  const std::string match = StrCat(prefix, "*");
  absl::StatusOr<std::unique_ptr<Connection>> conn = Take();
  if (!conn.ok()) return conn.status();
  do {
    absl::StatusOr<std::vector<Reply>> r =
        (*conn)->Run({{"SCAN", cursor, "MATCH", match, "COUNT", "1000"}});
    if (!r.ok() || (*r)[0]->type != REDIS_REPLY_ARRAY || (*r)[0]->elements != 2) {
      Observe(false);
      return Unavailable(StrCat("listing images: ", r.ok() ? "unexpected SCAN reply"
                                                           : std::string(MessageOf(r.status()))));
    }
    const redisReply* a = (*r)[0].get();
    cursor.assign(a->element[0]->str, a->element[0]->len);
    for (size_t i = 0; i < a->element[1]->elements; ++i) {
      const redisReply* k = a->element[1]->element[i];
      keys.emplace_back(k->str, k->len);
    }
  } while (cursor != "0");
  std::vector<StoredImageInfo> out;
  for (size_t i = 0; i < keys.size(); i += 256) {
    std::vector<std::vector<std::string_view>> cmds;
    for (size_t j = i; j < std::min(keys.size(), i + 256); ++j) {
      cmds.push_back({"HMGET", keys[j], "meta", "chunk_bytes"});
      cmds.push_back({"PTTL", keys[j]});
    }
    absl::StatusOr<std::vector<Reply>> r = (*conn)->Run(cmds);
    if (!r.ok()) {
      Observe(false);
      return Unavailable(StrCat("listing images: ", MessageOf(r.status())));
    }
    for (size_t k = 0; k + 1 < r->size(); k += 2) {
      const std::string id = keys[i + k / 2].substr(prefix.size());
      absl::StatusOr<std::pair<StoredImageInfo, uint64_t>> p = ParseMeta((*r)[k].get(), id, tenant);
      if (!p.ok()) continue;  // being written, just gone, or not ours
      out.push_back(Decorate(std::move(p->first), (*r)[k + 1]->integer));
    }
  }
  Observe(true);
  Give(*std::move(conn));
  std::sort(out.begin(), out.end(), [](const StoredImageInfo& a, const StoredImageInfo& b) {
    return a.last_used > b.last_used;
  });
  return out;
}

}  // namespace glimpse::server
