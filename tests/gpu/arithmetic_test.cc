// The device's arithmetic as the kernels rely on it (gpu/shaders/arithmetic_check.comp): 8-byte
// sums and products of samples widened the prelude's way, and of 8-byte values read from memory,
// equal the CPU's bit for bit, as does float luma near zero with subnormals flushed (luma_f).
// Plain conversions (double(v), uint64_t(v)) and the plain luma are computed and reported beside
// them but not required: a GPU's compiler may narrow the former, and a device may flush the
// latter's subnormals, which is why the kernels use neither. With
// GLIMPSE_DUMP_PROGRAMS=DIR, each program's binary (glGetProgramBinary; NVIDIA's holds its
// assembly as text) is written to DIR for reading what the compiler made of it.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "common/str.h"
#include "gpu/context.h"
#include "gpu/gl_handles.h"
#include "gpu/reference/float_color.h"
#include "tests/gpu_test_env.h"

namespace glimpse::gpu {
namespace {

constexpr int kResults = 8;
constexpr const char* kFormulations[] = {"plain conversions", "prelude widening",
                                         "values from memory"};

struct Operands {
  float a, b;
  uint32_t x, y;
  float r, g, bl;  // a float pixel for the luma
};

std::vector<uint32_t> Pack(const Operands& o) {
  std::vector<uint32_t> w(15, 0);
  w[0] = std::bit_cast<uint32_t>(o.a);
  w[1] = std::bit_cast<uint32_t>(o.b);
  w[2] = o.x;
  w[3] = o.y;
  auto put64 = [&](int i, uint64_t v) {
    w[size_t(i)] = uint32_t(v);
    w[size_t(i) + 1] = uint32_t(v >> 32);
  };
  put64(4, std::bit_cast<uint64_t>(double(o.a)));
  put64(6, std::bit_cast<uint64_t>(double(o.b)));
  put64(8, o.x);
  put64(10, o.y);
  w[12] = std::bit_cast<uint32_t>(o.r);
  w[13] = std::bit_cast<uint32_t>(o.g);
  w[14] = std::bit_cast<uint32_t>(o.bl);
  return w;
}

// What the shader must write, as the CPU computes it (no contraction: -ffp-contract=off).
std::vector<uint64_t> Expected(const Operands& o) {
  const double a = o.a, b = o.b;
  const uint64_t x = o.x, y = o.y;
  const float luma = 0.299f * o.r + 0.587f * o.g + 0.114f * o.bl;  // subnormals kept
  return {std::bit_cast<uint64_t>(a + b),
          std::bit_cast<uint64_t>(a * a),
          std::bit_cast<uint64_t>(a * a + b * b),
          x + y,
          x * 0xffffffffull,
          x * x,
          std::bit_cast<uint32_t>(luma),
          std::bit_cast<uint32_t>(reference::LumaF(o.r, o.g, o.bl))};
}

constexpr const char* kResultNames[] = {"a + b",         "a * a", "a * a + b * b", "x + y",
                                        "sum of x << s", "x * x", "float luma",    "luma_f"};

void DumpBinary(GLuint program, const std::string& name) {
  const char* dir = std::getenv("GLIMPSE_DUMP_PROGRAMS");
  if (dir == nullptr) return;
  GLint length = 0;
  glGetProgramiv(program, GL_PROGRAM_BINARY_LENGTH, &length);
  std::vector<char> bytes(size_t(std::max(length, 0)));
  GLenum format = 0;
  glGetProgramBinary(program, length, nullptr, &format, bytes.data());
  std::ofstream(StrCat(dir, "/", name, ".bin"), std::ios::binary)
      .write(bytes.data(), std::streamsize(bytes.size()));
}

TEST(ArithmeticTest, WidenedSumsProductsAndFlushedLumaAreExact) {
  GLIMPSE_REQUIRE_CONTEXT(ctx);
  const float max_sub = std::ldexp(float(0x7fffff), -149), min_normal = std::ldexp(1.0f, -126);
  const Operands cases[] = {
      {16777215.0f, 0.5f, 4294836225u, 4294836225u, max_sub, 0.0f, 0.0f},
      {1.0f + std::ldexp(1.0f, -23), -std::ldexp(1.0f, -40), 0xffffffffu, 1u, min_normal,
       min_normal, min_normal},
      {std::ldexp(float(0xffffff), 103), 1.0f, 65535u, 0x80000000u, -max_sub, 1.0f, 0.0f},
      {min_normal, max_sub, 123456789u, 3987654321u, std::ldexp(1.0f, -140), 0.0f, 0.0f},
  };
  const bool int64 = ctx.info().limits.int64;
  std::string report = "formulation, precise: results that differ from the CPU's\n";
  for (int f = 0; f < 3; ++f) {
    for (bool precise : {false, true}) {
      const std::string defines =
          StrCat("#define FORMULATION ", f, "\n", precise ? "#define PRECISE 1\n" : "");
      absl::StatusOr<GLuint> program = ctx.Program("arithmetic_check", defines);
      ASSERT_TRUE(program.ok()) << program.status();
      DumpBinary(*program, StrCat("arithmetic_check_", f, precise ? "_precise" : ""));
      std::string wrong;
      for (const Operands& o : cases) {
        const std::vector<uint32_t> words = Pack(o);
        Buffer in = Buffer::Create(words.size() * 4, words.data());
        Buffer out = Buffer::Create(kResults * 8);
        in.BindBase(0);
        out.BindBase(1);
        glUseProgram(*program);
        glDispatchCompute(1, 1, 1);
        glMemoryBarrier(GL_BUFFER_UPDATE_BARRIER_BIT);
        uint64_t got[kResults] = {};
        out.Read(0, sizeof(got), got);
        const std::vector<uint64_t> want = Expected(o);
        for (int i = 0; i < kResults; ++i) {
          if (i >= 3 && i <= 5 && !int64) continue;  // no 64-bit integers on this device
          if (i == 2 && !precise) continue;          // a * a + b * b may be fused without `precise`
          if (got[i] == want[size_t(i)]) continue;
          const std::string line =
              StrCat(kResultNames[i], " of a=", o.a, " b=", o.b, " x=", o.x, " y=", o.y, " rgb=(",
                     o.r, ", ", o.g, ", ", o.bl, "): ", fmt::format("{:#x}", got[i]), " want ",
                     fmt::format("{:#x}", want[size_t(i)]));
          StrAppend(&wrong, "\n    ", line);
          // The kernels' formulations must be exact, and luma_f (the same in every program:
          // checked once); the plain conversions and the plain luma (which a device that flushes
          // subnormals computes differently) are reported only.
          const bool required = i == 7 ? f == 1 && !precise : i != 6 && f != 0;
          if (required)
            ADD_FAILURE() << kFormulations[f] << (precise ? ", precise" : "") << ": " << line;
        }
      }
      StrAppend(&report, "  ", kFormulations[f], precise ? ", precise" : "", ":",
                wrong.empty() ? " none" : wrong, "\n");
    }
  }
  std::printf("%s", report.c_str());
}

}  // namespace
}  // namespace glimpse::gpu
