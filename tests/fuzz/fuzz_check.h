// What every fuzz target checks beyond "no crash": a refusal is a client error with a message,
// never a server fault.
#ifndef GLIMPSE_TESTS_FUZZ_FUZZ_CHECK_H_
#define GLIMPSE_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"

namespace glimpse::fuzz {

// Aborts (a libFuzzer crash, with the input saved) when `ok` is false.
inline void Check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz check failed: %s\n", what.c_str());
  std::abort();
}

// Untrusted input may be refused only as the client's fault, and the message must say why.
inline void CheckRefusal(const absl::Status& s) {
  if (s.ok()) return;
  const absl::StatusCode c = s.code();
  Check(c == absl::StatusCode::kInvalidArgument || c == absl::StatusCode::kResourceExhausted ||
            c == absl::StatusCode::kOutOfRange || c == absl::StatusCode::kFailedPrecondition,
        "unexpected status " + s.ToString());
  Check(!s.message().empty(), "an error without a message");
}

}  // namespace glimpse::fuzz

#endif  // GLIMPSE_TESTS_FUZZ_FUZZ_CHECK_H_
