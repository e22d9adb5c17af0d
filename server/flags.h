// A small command-line parser for `--name=value` flags (dashes in names, as the deployment uses
// them), with typed targets, ranges, and a --help that lists every flag with its default.
//
//   int64_t max_queue = 64;  // the default --help shows
//   FlagSet flags("Usage: glimpse-server [--flag=value ...]");
//   flags.AddInt("max-queue", &max_queue, 1, 1 << 20, "GPU jobs waiting at most");
//   if (std::string err = flags.Parse(argc, argv); !err.empty()) {
//     std::fprintf(stderr, "glimpse-server: %s\n", err.c_str());
//     return 2;
//   }
//   if (flags.help_requested()) {
//     std::fputs(flags.Help().c_str(), stdout);
//     return 0;
//   }
#ifndef GLIMPSE_SERVER_FLAGS_H_
#define GLIMPSE_SERVER_FLAGS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace glimpse::server {

class FlagSet {
 public:
  explicit FlagSet(std::string usage) : usage_(std::move(usage)) {}

  // The target's current value is the default shown by --help.
  void AddString(std::string name, std::string* target, std::string help);
  void AddInt(std::string name, int64_t* target, int64_t min, int64_t max, std::string help);
  // A finite decimal number in [min, max].
  void AddDouble(std::string name, double* target, double min, double max, std::string help);

  // Parses argv[1..]: "--name=value" or "--name value"; "--help" / "-h" sets help_requested().
  // Returns "" or a message naming the flag and value.
  std::string Parse(int argc, char** argv);
  bool help_requested() const { return help_; }
  std::string Help() const;

 private:
  struct Flag {
    std::string name, help, default_value;
    std::function<std::string(const std::string&)> set;  // "" or an error
  };
  std::string usage_;
  std::vector<Flag> flags_;
  bool help_ = false;
};

}  // namespace glimpse::server

#endif  // GLIMPSE_SERVER_FLAGS_H_
