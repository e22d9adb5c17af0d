// A test's view of a server's Prometheus endpoint: /metrics fetched with curl and parsed.
#ifndef GLIMPSE_TESTS_SERVICE_METRICS_SCRAPE_H_
#define GLIMPSE_TESTS_SERVICE_METRICS_SCRAPE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>

namespace glimpse::testing {

using Labels = std::map<std::string, std::string>;

// One scrape: "name{a="x",b="y"}" (labels sorted by name) -> value.
class Scrape {
 public:
  static Scrape Fetch(int port) {
    const std::string cmd =
        "curl -sS --fail --max-time 20 http://127.0.0.1:" + std::to_string(port) + "/metrics 2>&1";
    Scrape s;
    std::FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) {
      ADD_FAILURE() << "cannot run " << cmd;
      return s;
    }
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) s.text_.append(buf, n);
    const int rc = pclose(p);
    EXPECT_EQ(rc, 0) << cmd << " failed: " << s.text_;
    std::istringstream in(s.text_);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      const size_t space = line.rfind(' ');
      const size_t brace = line.find('{');
      std::string name = line.substr(0, std::min(brace, space));
      Labels labels;
      if (brace < space) {
        const std::string body = line.substr(brace + 1, line.rfind('}') - brace - 1);
        size_t pos = 0;
        while (pos < body.size()) {
          const size_t eq = body.find('=', pos);
          const size_t end = body.find('"', eq + 2);
          labels[body.substr(pos, eq - pos)] = body.substr(eq + 2, end - eq - 2);
          pos = end + 2;  // past '",'
        }
      }
      s.values_[Key(name, labels)] = std::stod(line.substr(space + 1));
    }
    return s;
  }

  // 0 for a series not (yet) exported.
  double Get(const std::string& name, const Labels& labels = {}) const {
    auto it = values_.find(Key(name, labels));
    return it == values_.end() ? 0 : it->second;
  }
  bool Has(const std::string& name, const Labels& labels = {}) const {
    return values_.count(Key(name, labels)) > 0;
  }
  const std::string& text() const { return text_; }

 private:
  static std::string Key(const std::string& name, const Labels& labels) {
    std::string k = name + "{";
    for (const auto& [n, v] : labels) k += n + "=\"" + v + "\",";
    return k + "}";
  }
  std::string text_;
  std::map<std::string, double> values_;
};

}  // namespace glimpse::testing

#endif  // GLIMPSE_TESTS_SERVICE_METRICS_SCRAPE_H_
