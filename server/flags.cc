#include "server/flags.h"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace glimpse::server {

void FlagSet::AddString(std::string name, std::string* target, std::string help) {
  flags_.push_back({std::move(name), std::move(help), fmt::format("\"{}\"", *target),
                    [target](const std::string& v) {
                      *target = v;
                      return std::string();
                    }});
}

void FlagSet::AddInt(std::string name, int64_t* target, int64_t min, int64_t max,
                     std::string help) {
  const std::string n = name;
  flags_.push_back({std::move(name), std::move(help), std::to_string(*target),
                    [target, min, max, n](const std::string& v) {
                      errno = 0;
                      char* end = nullptr;
                      const long long x = std::strtoll(v.c_str(), &end, 10);
                      if (v.empty() || *end != '\0' || errno == ERANGE || x < min || x > max) {
                        return fmt::format("--{} must be an integer in [{}, {}], got \"{}\"", n,
                                           min, max, v);
                      }
                      *target = x;
                      return std::string();
                    }});
}

void FlagSet::AddDouble(std::string name, double* target, double min, double max,
                        std::string help) {
  const std::string n = name;
  flags_.push_back({std::move(name), std::move(help), fmt::format("{}", *target),
                    [target, min, max, n](const std::string& v) {
                      errno = 0;
                      char* end = nullptr;
                      const double x = std::strtod(v.c_str(), &end);
                      if (v.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(x) ||
                          x < min || x > max) {
                        return fmt::format("--{} must be a number in [{}, {}], got \"{}\"", n, min,
                                           max, v);
                      }
                      *target = x;
                      return std::string();
                    }});
}

std::string FlagSet::Parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "-help") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      return fmt::format("unexpected argument \"{}\": flags take the form --name=value", arg);
    }
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    bool has_value = eq != std::string::npos;
    if (has_value) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    for (char& c : name) {
      if (c == '_') c = '-';
    }
    const Flag* flag = nullptr;
    for (const Flag& f : flags_) {
      if (f.name == name) flag = &f;
    }
    if (flag == nullptr) return fmt::format("unknown flag --{} (see --help)", name);
    if (!has_value) {
      if (i + 1 >= argc) return fmt::format("--{} needs a value: --{}=VALUE", name, name);
      value = argv[++i];
    }
    if (std::string err = flag->set(value); !err.empty()) return err;
  }
  return "";
}

std::string FlagSet::Help() const {
  std::string out = usage_ + "\n\nFlags:\n";
  for (const Flag& f : flags_) {
    out += fmt::format("  --{}  (default {})\n      {}\n", f.name, f.default_value, f.help);
  }
  return out;
}

}  // namespace glimpse::server
