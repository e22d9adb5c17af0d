// String concatenation for messages. (Debian's Abseil has its own string_view, which makes
// absl::StrCat refuse std::string_view; this accepts anything fmt can print.)
//
//   std::string message = StrCat("bins must be in [1, ", kMaxHistogramBins, "], got ", bins);
//   StrAppend(&message, " for a ", DescribeImage(desc), " image");  // std::string_view, numbers...
#ifndef GLIMPSE_COMMON_STR_H_
#define GLIMPSE_COMMON_STR_H_

#include <fmt/format.h>

#include <string>

namespace glimpse {

template <typename... Args>
void StrAppend(std::string* out, const Args&... args) {
  (fmt::format_to(std::back_inserter(*out), "{}", args), ...);
}

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  StrAppend(&out, args...);
  return out;
}

}  // namespace glimpse

#endif  // GLIMPSE_COMMON_STR_H_
