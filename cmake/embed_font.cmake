# Script mode: writes OUT, a C++ file defining glimpse::client::ChartFont() as the bytes of the
# font file IN (a string literal of \xHH escapes, 32 bytes a line: quick to compile).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" digits)
math(EXPR bytes "${digits} / 2")
set(d "[0-9a-f]")
string(REPEAT "${d}" 64 line)
string(REGEX REPLACE "(${line})" "\\1\n" hex "${hex}")
string(REGEX REPLACE "(${d}${d})" "\\\\x\\1" hex "${hex}")
string(REPLACE "\n" "\"\n    \"" hex "${hex}")
get_filename_component(name ${IN} NAME)
file(WRITE ${OUT}.tmp "// Generated from ${name} by cmake/embed_font.cmake. Do not edit.
#include <cstddef>
#include <string_view>

namespace glimpse::client {
namespace {
constexpr char kFont[${bytes} + 1] =
    \"${hex}\";
}  // namespace

std::string_view ChartFont() { return std::string_view(kFont, ${bytes}); }

}  // namespace glimpse::client
")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
