// Who is calling: bearer tokens mapped to tenants (--tokens, re-read on SIGHUP) and the subject of
// a verified client certificate (--tls-client-ca). Every ImageAnalytics call is admitted here
// first; health checking and reflection are other services and stay open.
//
// Which credential names the tenant:
//   --tokens only            the token (`authorization: Bearer <token>` metadata)
//   --tls-client-ca only     the certificate's subject CN
//   both                     the token; the certificate only admits the connection
//   neither                  access control is off: every caller is the one tenant ""
#ifndef GLIMPSE_SERVER_ACCESS_ACCESS_H_
#define GLIMPSE_SERVER_ACCESS_ACCESS_H_

#include <grpcpp/grpcpp.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace glimpse::server {

// A token file: `TENANT TOKEN [WEIGHT]` per line, `#` comments and blank lines ignored. Tenants
// are 1 to 64 of [A-Za-z0-9._-]; tokens 16 to 4096 printable ASCII characters without spaces,
// each naming one tenant (a tenant may have several, which is how a token is rotated without a
// gap). WEIGHT, a number in [kMinWeight, kMaxWeight] (default 1), is the tenant's share of the
// GPU (server/worker/fair_queue.h); lines of one tenant that give a weight must give the same one.
// Only SHA-256 digests of the tokens are kept.
struct TokenTable {
  using Digest = std::array<uint8_t, 32>;
  static constexpr double kMinWeight = 0.01, kMaxWeight = 1000;
  struct Entry {
    Digest digest;
    std::string tenant;
  };
  std::vector<Entry> entries;
  std::map<std::string, double, std::less<>> weights;  // tenants whose lines give one

  // The tenant whose token has this digest, comparing with every entry in constant time each,
  // so the time taken says nothing about which entry (or how much of one) matched.
  const std::string* Find(const Digest& digest) const;
  // The tenant's weight: its lines', else 1.
  double WeightOf(std::string_view tenant) const;
};

// Parses `text`; errors name `file:line` and what is wrong, never the token itself.
absl::StatusOr<TokenTable> ParseTokens(std::string_view text, std::string_view file);
absl::StatusOr<TokenTable> ReadTokens(const std::string& path);

// True for a valid tenant name (also checked on certificate subjects).
bool IsTenantName(std::string_view name);

struct AccessOptions {
  std::string tokens_file;           // "" = no tokens
  bool client_certificates = false;  // --tls-client-ca is set: connections carry verified certs
};

class Access {
 public:
  // Reads the token file (errors are start-up errors).
  static absl::StatusOr<std::unique_ptr<Access>> Create(const AccessOptions& options);

  bool enabled() const { return !options_.tokens_file.empty() || options_.client_certificates; }
  // One line for the start-up log.
  std::string Describe() const;

  // The calling tenant ("" when access control is off), or UNAUTHENTICATED saying what is missing
  // or wrong, never echoing a token.
  absl::StatusOr<std::string> Authenticate(const grpc::CallbackServerContext& context) const;

  // Re-reads the token file; a file that does not parse leaves the current tokens in place and
  // the error is returned. Calls already admitted are not affected either way.
  absl::Status Reload();
  // Tokens now loaded.
  size_t tokens() const;
  // The tenant's share of the GPU (the token file's weight column; 1 without one).
  double WeightOf(std::string_view tenant) const;

 private:
  explicit Access(AccessOptions options) : options_(std::move(options)) {}
  const AccessOptions options_;
  mutable std::mutex mu_;
  std::shared_ptr<const TokenTable> tokens_;
};

// SHA-256 of `s`.
TokenTable::Digest Sha256(std::string_view s);

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_ACCESS_ACCESS_H_
