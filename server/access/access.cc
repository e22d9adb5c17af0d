#include "server/access/access.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "common/str.h"
#include "server/observability/metrics.h"

namespace glimpse::server {
namespace {

constexpr size_t kMaxTenant = 64;
constexpr size_t kMinToken = 16;
constexpr size_t kMaxToken = 4096;
constexpr std::string_view kBearer = "bearer ";

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && IsSpace(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !IsSpace(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

bool IsTokenChar(char c) { return c > ' ' && c < 0x7f; }

// A weight: a plain decimal number (digits, at most one point) in the allowed range.
std::optional<double> ParseWeight(std::string_view s) {
  if (s.empty() || s.size() > 16) return std::nullopt;
  int points = 0;
  for (char c : s) {
    if (c == '.') {
      ++points;
    } else if (c < '0' || c > '9') {
      return std::nullopt;
    }
  }
  if (points > 1 || s == ".") return std::nullopt;
  const double w = std::stod(std::string(s));
  if (!(w >= TokenTable::kMinWeight && w <= TokenTable::kMaxWeight)) return std::nullopt;
  return w;
}

absl::Status Unauthenticated(std::string_view reason, std::string message) {
  RecordUnauthenticated(reason);
  return absl::UnauthenticatedError(std::move(message));
}

}  // namespace

TokenTable::Digest Sha256(std::string_view s) {
  TokenTable::Digest d;
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d.data());
  return d;
}

const std::string* TokenTable::Find(const Digest& digest) const {
  const std::string* found = nullptr;
  for (const Entry& e : entries) {
    // No early exit: every entry is compared whichever matches.
    const bool match = CRYPTO_memcmp(e.digest.data(), digest.data(), digest.size()) == 0;
    if (match) found = &e.tenant;
  }
  return found;
}

double TokenTable::WeightOf(std::string_view tenant) const {
  auto it = weights.find(tenant);
  return it != weights.end() ? it->second : 1.0;
}

bool IsTenantName(std::string_view name) {
  if (name.empty() || name.size() > kMaxTenant) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

absl::StatusOr<TokenTable> ParseTokens(std::string_view text, std::string_view file) {
  TokenTable table;
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    const std::string where = StrCat(file, ":", line_no, ": ");
    std::vector<std::string_view> f = Fields(line);
    if (f.empty() || f[0][0] == '#') continue;
    if (f.size() != 2 && f.size() != 3) {
      return absl::InvalidArgumentError(StrCat(where,
                                               "expected `TENANT TOKEN` or `TENANT TOKEN WEIGHT`, "
                                               "got ",
                                               f.size(), " field", f.size() == 1 ? "" : "s"));
    }
    if (!IsTenantName(f[0])) {
      return absl::InvalidArgumentError(
          StrCat(where, "tenant \"", f[0], "\" must be 1 to 64 of A-Z a-z 0-9 . _ -"));
    }
    const std::string_view token = f[1];
    if (token.size() < kMinToken || token.size() > kMaxToken) {
      return absl::InvalidArgumentError(StrCat(where, "the token of tenant ", f[0], " is ",
                                               token.size(), " characters; it must be ", kMinToken,
                                               " to ", kMaxToken));
    }
    for (char c : token) {
      if (!IsTokenChar(c)) {
        return absl::InvalidArgumentError(
            StrCat(where, "the token of tenant ", f[0], " holds a byte outside printable ASCII"));
      }
    }
    const TokenTable::Digest d = Sha256(token);
    if (const std::string* other = table.Find(d)) {
      return absl::InvalidArgumentError(StrCat(where, "the token of tenant ", f[0],
                                               " is also the token of tenant ", *other,
                                               " on an earlier line; a token names one tenant"));
    }
    if (f.size() == 3) {
      std::optional<double> w = ParseWeight(f[2]);
      if (!w) {
        return absl::InvalidArgumentError(
            StrCat(where, "the weight of tenant ", f[0], " must be a number in [",
                   TokenTable::kMinWeight, ", ", TokenTable::kMaxWeight, "], got \"", f[2], "\""));
      }
      auto [it, inserted] = table.weights.emplace(std::string(f[0]), *w);
      if (!inserted && it->second != *w) {
        return absl::InvalidArgumentError(StrCat(where, "the weight of tenant ", f[0], " is ", f[2],
                                                 " here but ", it->second,
                                                 " on an earlier line; a tenant has one weight"));
      }
    }
    table.entries.push_back({d, std::string(f[0])});
  }
  if (table.entries.empty()) {
    return absl::InvalidArgumentError(
        StrCat(file, ": holds no `TENANT TOKEN` line; every call would be refused"));
  }
  return table;
}

absl::StatusOr<TokenTable> ReadTokens(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(StrCat("--tokens: cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseTokens(ss.str(), path);
}

absl::StatusOr<std::unique_ptr<Access>> Access::Create(const AccessOptions& options) {
  std::unique_ptr<Access> a(new Access(options));
  if (!options.tokens_file.empty()) {
    absl::StatusOr<TokenTable> t = ReadTokens(options.tokens_file);
    if (!t.ok()) return t.status();
    a->tokens_ = std::make_shared<const TokenTable>(*std::move(t));
  }
  return a;
}

std::string Access::Describe() const {
  if (!enabled()) {
    return "access control is off: any caller may list, read and delete every image (--tokens, "
           "--tls-client-ca)";
  }
  if (options_.tokens_file.empty()) {
    return "access control on: the subject CN of the client certificate names the tenant";
  }
  return StrCat("access control on: ", tokens(), " bearer token(s) from ", options_.tokens_file,
                options_.client_certificates ? " (client certificates required as well)" : "",
                "; SIGHUP re-reads the file");
}

size_t Access::tokens() const {
  std::lock_guard lock(mu_);
  return tokens_ != nullptr ? tokens_->entries.size() : 0;
}

double Access::WeightOf(std::string_view tenant) const {
  std::lock_guard lock(mu_);
  return tokens_ != nullptr ? tokens_->WeightOf(tenant) : 1.0;
}

absl::Status Access::Reload() {
  if (options_.tokens_file.empty()) return absl::OkStatus();
  absl::StatusOr<TokenTable> t = ReadTokens(options_.tokens_file);
  if (!t.ok()) return t.status();
  auto table = std::make_shared<const TokenTable>(*std::move(t));
  std::lock_guard lock(mu_);
  tokens_ = std::move(table);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Access::Authenticate(const grpc::CallbackServerContext& context) const {
  if (!enabled()) return std::string();
  if (options_.tokens_file.empty()) {
    // gRPC's handshake has verified the certificate against --tls-client-ca already.
    std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
    std::vector<grpc::string_ref> cn = auth != nullptr
                                           ? auth->FindPropertyValues("x509_common_name")
                                           : std::vector<grpc::string_ref>{};
    if (cn.size() != 1) {
      return Unauthenticated("no_certificate",
                             "a client certificate with a subject CN is required (--tls-cert and "
                             "--tls-key on the client)");
    }
    const std::string name(cn[0].data(), cn[0].size());
    if (!IsTenantName(name)) {
      return Unauthenticated("bad_certificate",
                             StrCat("the client certificate's subject CN \"", name,
                                    "\" is not a tenant name (1 to 64 of A-Z a-z 0-9 . _ -)"));
    }
    return name;
  }
  const auto& metadata = context.client_metadata();
  auto [first, last] = metadata.equal_range("authorization");
  if (first == last) {
    return Unauthenticated("no_token",
                           "this server requires a bearer token: metadata `authorization: Bearer "
                           "<token>` (glimpse --token or $GLIMPSE_TOKEN)");
  }
  if (std::next(first) != last) {
    return Unauthenticated("bad_token", "more than one authorization metadata entry");
  }
  const std::string_view value(first->second.data(), first->second.size());
  std::string scheme(value.substr(0, std::min(value.size(), kBearer.size())));
  for (char& c : scheme) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != kBearer) {
    return Unauthenticated("bad_token",
                           "the authorization metadata must be `Bearer <token>` (RFC 6750)");
  }
  std::string_view token = value.substr(kBearer.size());
  while (!token.empty() && IsSpace(token.front())) token.remove_prefix(1);
  const TokenTable::Digest d = Sha256(token);
  std::shared_ptr<const TokenTable> table;
  {
    std::lock_guard lock(mu_);
    table = tokens_;
  }
  const std::string* tenant = table->Find(d);
  if (tenant == nullptr) {
    return Unauthenticated("bad_token", "the bearer token is not valid (unknown or revoked)");
  }
  return *tenant;
}

}  // namespace glimpse::server
