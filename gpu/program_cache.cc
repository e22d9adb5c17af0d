// Context's program cache: shaders from the embedded sources (with their #includes expanded),
// compiled and linked once per name and defines, checked at once or, inside a ProgramBatch, when
// the batch finishes.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "common/str.h"
#include "gpu/context.h"
#include "gpu/internal/embedded_shaders.h"

namespace glimpse::gpu {
namespace {

// The embedded shader `name` with each line `#include "other.glsl"` replaced by that file's
// text (one level deep; `file` numbers the #line directives that follow).
absl::StatusOr<std::string> ExpandIncludes(std::string_view name, int file) {
  std::optional<std::string_view> text = EmbeddedShader(name);
  if (!text) return absl::NotFoundError(StrCat("no shader named \"", name, "\""));
  std::string out;
  int line_no = 0;
  for (std::string_view rest = *text; !rest.empty();) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    ++line_no;
    constexpr std::string_view kInclude = "#include \"";
    if (line.substr(0, kInclude.size()) == kInclude) {
      std::string_view inc = line.substr(kInclude.size());
      inc = inc.substr(0, inc.find('"'));
      inc = inc.substr(0, inc.rfind('.'));
      std::optional<std::string_view> inc_text = EmbeddedShader(inc);
      if (!inc_text) {
        return absl::NotFoundError(StrCat("shader ", name, " includes unknown \"", inc, "\""));
      }
      StrAppend(&out, "#line 1 ", file + 1000, "\n", *inc_text, "\n#line ", line_no + 1, " ", file,
                "\n");
    } else {
      StrAppend(&out, line, "\n");
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<GLuint> Context::Program(std::string_view name, std::string_view defines) {
  std::string key = StrCat(name, "\n", defines);
  if (auto it = programs_.find(key); it != programs_.end()) return it->second.get();

  absl::StatusOr<std::string> body = ExpandIncludes(name, 2);
  if (!body.ok()) return body.status();
  absl::StatusOr<std::string> prelude = ExpandIncludes("prelude", 1);
  if (!prelude.ok()) return prelude.status();
  std::string source = StrCat(
      "#version 430 core\n",
      info_.limits.int64 ? "#extension GL_ARB_gpu_shader_int64 : enable\n#define HAVE_INT64 1\n"
                         : "",
      info_.limits.subgroup_ballot
          ? "#extension GL_ARB_shader_ballot : enable\n#define HAVE_BALLOT 1\n"
          : "",
      defines, "\n#line 1 1\n", *prelude, "\n#line 1 2\n", *body);

  GlShader shader = GlShader::Create();
  const char* src = source.c_str();
  glShaderSource(shader.get(), 1, &src, nullptr);
  glCompileShader(shader.get());
  // Linked at once: a driver that compiles in the background (GL_KHR_parallel_shader_compile)
  // takes both and returns; a failed compile fails the link, and CheckBuilt reports the compile.
  GlProgram program = GlProgram::Create();
  glAttachShader(program.get(), shader.get());
  glLinkProgram(program.get());
  const GLuint id = program.get();
  if (batches_ > 0) {
    pending_.push_back({key, std::string(name), std::string(defines), std::move(shader)});
  } else if (absl::Status s = CheckBuilt(name, defines, shader.get(), id); !s.ok()) {
    return s;
  }
  programs_.emplace(std::move(key), std::move(program));
  return id;
}

absl::Status Context::CheckBuilt(std::string_view name, std::string_view defines, GLuint shader,
                                 GLuint program) {
  auto info_log = [](GLuint obj, bool is_program) {
    GLint len = 0;
    (is_program ? glGetProgramiv : glGetShaderiv)(obj, GL_INFO_LOG_LENGTH, &len);
    std::string log(static_cast<size_t>(std::max(len, 1)), '\0');
    (is_program ? glGetProgramInfoLog : glGetShaderInfoLog)(obj, len, nullptr, log.data());
    return log;
  };
  GLint ok = 0;
  glGetShaderiv(shader, GL_COMPILE_STATUS, &ok);
  if (!ok) {
    return absl::InternalError(StrCat("compiling shader ", name, " (defines: ", defines,
                                      ") failed (file 1 = prelude, 2 = shader):\n",
                                      info_log(shader, false)));
  }
  glGetProgramiv(program, GL_LINK_STATUS, &ok);
  if (!ok) {
    return absl::InternalError(
        StrCat("linking shader ", name, " failed:\n", info_log(program, true)));
  }
  return absl::OkStatus();
}

absl::Status Context::FinishPending() {
  absl::Status first;
  for (PendingProgram& p : std::exchange(pending_, {})) {
    auto it = programs_.find(p.key);
    absl::Status s = CheckBuilt(p.name, p.defines, p.shader.get(), it->second.get());
    if (!s.ok()) {
      programs_.erase(it);
      first.Update(s);
    }
  }
  return first;
}

}  // namespace glimpse::gpu
