// UTF-8 as protobuf checks it in `string` fields (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF).
//
//   std::string label = ValidUtf8(path.filename().string());  // bad bytes become U+FFFD
//   if (size_t at = InvalidUtf8At(text); at != kAllUtf8) Refuse(at);
#ifndef GLIMPSE_COMMON_UTF8_H_
#define GLIMPSE_COMMON_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace glimpse {

// The length of the well-formed UTF-8 sequence at the start of `s` (1 to 4) with its code point
// in `*cp`, or 0 if `s` does not start with one (empty, a stray or missing continuation byte, an
// overlong form, a surrogate, or beyond U+10FFFF).
inline size_t DecodeUtf8(std::string_view s, char32_t* cp) {
  if (s.empty()) return 0;
  const auto b0 = uint8_t(s[0]);
  if (b0 < 0x80) return *cp = b0, 1;
  size_t n;
  char32_t c, min;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, c = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, c = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, c = b0 & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  for (size_t i = 1; i < n; ++i) {
    const auto b = uint8_t(s[i]);
    if ((b & 0xC0) != 0x80) return 0;
    c = (c << 6) | (b & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
  return *cp = c, n;
}

inline constexpr size_t kAllUtf8 = std::string_view::npos;

// The offset of the first byte of `s` that does not start a well-formed sequence, or kAllUtf8.
inline size_t InvalidUtf8At(std::string_view s) {
  char32_t cp;
  for (size_t i = 0; i < s.size();) {
    const size_t n = DecodeUtf8(s.substr(i), &cp);
    if (n == 0) return i;
    i += n;
  }
  return kAllUtf8;
}

// `s` with each byte that does not start a well-formed sequence replaced by U+FFFD: what a file
// name in another encoding becomes in a protobuf `string` field.
inline std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  char32_t cp;
  for (size_t i = 0; i < s.size();) {
    const size_t n = DecodeUtf8(s.substr(i), &cp);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace glimpse

#endif  // GLIMPSE_COMMON_UTF8_H_
