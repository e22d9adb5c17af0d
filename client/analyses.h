// The analysis commands of the glimpse CLI: one per analysis, and `analyze`, which runs several
// in one call. Each analysis's request is built from its flags and its result written by the
// same code in both.
#ifndef GLIMPSE_CLIENT_ANALYSES_H_
#define GLIMPSE_CLIENT_ANALYSES_H_

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "client/client.h"

namespace glimpse::client {

int Histogram(const Options& o, const Connection& c);
int IntegralImage(const Options& o, const Connection& c);
int Compaction(const Options& o, const Connection& c);
int BoxFilter(const Options& o, const Connection& c);
// `glimpse analyze IMAGE --histogram[=bins=64,csv=h.csv] --integral_image --compaction=lo=1,hi=9
// --box_filter=rx=3,out=box.png ...`: each analysis flag's value holds that command's own flags.
int Analyze(const Options& o, const Connection& c);
// `glimpse analyze --each FILE... --histogram ...`: `analyses` (named `names`) on every file or id
// in one AnalyzeBatch call; one row per image and analysis on stdout (client/each.cc).
int AnalyzeEach(const Options& o, const Connection& c,
                const google::protobuf::RepeatedPtrField<v1::Analysis>& analyses,
                const std::vector<std::string>& names);
// One AnalyzeBatch call (client/each.cc), shared by `analyze --each` and `load --batch`: a header
// with `analyses` and `ordered`, then `count` images, image(i, m) filling the i-th on a writer
// thread as the server takes them; every answer goes to `on_answer` on the calling thread, in
// arrival order. Returns the call's status.
grpc::Status RunBatch(const Connection& c,
                      const google::protobuf::RepeatedPtrField<v1::Analysis>& analyses,
                      bool ordered, size_t count,
                      const std::function<void(size_t, v1::BatchImage*)>& image,
                      const std::function<void(const v1::AnalyzeBatchResponse&)>& on_answer);

// From the command table (client/main.cc): the flags an analysis's command accepts (nullptr for
// an unknown name), and a command's name for an alias ("compact" -> "compaction").
const std::set<std::string>* AnalysisFlags(const std::string& name);
std::string CanonicalCommand(const std::string& name);

// Whether an IMAGE argument is a stored image's id (32 hex digits) rather than a file name.
bool LooksLikeId(const std::string& s);

// "640x480 3-channel uint8 (921600 bytes)".
std::string Describe(const v1::ImageInfo& i);

}  // namespace glimpse::client

#endif  // GLIMPSE_CLIENT_ANALYSES_H_
