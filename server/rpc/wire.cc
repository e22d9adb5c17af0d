#include "server/rpc/wire.h"

#include <fmt/format.h>
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/slice.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/str.h"
#include "common/utf8.h"

namespace glimpse::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// The message that holds the aliased strings, kept until gRPC drops the last slice of them.
// Counted by hand: each slice's reference is this object itself, released on whichever gRPC
// thread drops the slice; the encoder's own reference, released last on its thread, orders
// everything it did to the message before the delete.
struct Held {
  explicit Held(std::unique_ptr<Message> m) : message(std::move(m)) {}
  std::unique_ptr<Message> message;
  std::atomic<int64_t> refs{1};
};

void Unhold(void* p) {
  auto* held = static_cast<Held*>(p);
  if (held->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete held;
}

void AppendVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out->push_back(char(v));
}

// The tag of a length-delimited field (bytes or message).
void AppendTag(std::string* out, int number) {
  AppendVarint(out, (uint64_t(uint32_t(number)) << 3) | 2);
}

bool HoldsLarge(const Message& m, size_t min);

// Whether field `f` of `m` is, or holds at any depth, a bytes field of at least `min` bytes.
bool FieldHoldsLarge(const Message& m, const FieldDescriptor* f, size_t min) {
  if (f->is_repeated()) return false;
  const Reflection* r = m.GetReflection();
  std::string scratch;
  if (f->type() == FieldDescriptor::TYPE_BYTES) {
    return r->GetStringReference(m, f, &scratch).size() >= min;
  }
  return f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && HoldsLarge(r->GetMessage(m, f), min);
}

// Whether `m` holds a bytes field of at least `min` bytes, at any depth.
bool HoldsLarge(const Message& m, size_t min) {
  if (m.ByteSizeLong() < min) return false;
  std::vector<const FieldDescriptor*> fields;
  m.GetReflection()->ListFields(m, &fields);
  for (const FieldDescriptor* f : fields) {
    if (FieldHoldsLarge(m, f, min)) return true;
  }
  return false;
}

class Encoder {
 public:
  Encoder(Held* held, size_t min) : held_(held), min_(min) {}

  // Appends the encoding of `m`, a message the buffer keeps: its small fields serialized, then
  // each field holding something large, its large strings as slices of themselves.
  void Encode(Message& m) {
    const Reflection* r = m.GetReflection();
    std::vector<const FieldDescriptor*> fields, small, large;
    r->ListFields(m, &fields);
    for (const FieldDescriptor* f : fields) {
      (FieldHoldsLarge(m, f, min_) ? large : small).push_back(f);
    }
    if (large.empty()) {
      m.AppendToString(&pending_);
      return;
    }
    // The small fields move out to be serialized; the large ones stay where they are. (Swapping
    // a large field out instead would copy it when it is a member of a oneof.)
    std::unique_ptr<Message> rest(m.New());
    r->SwapFields(&m, rest.get(), small);
    rest->AppendToString(&pending_);
    for (const FieldDescriptor* f : large) {
      AppendTag(&pending_, f->number());
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        Message* sub = r->MutableMessage(&m, f);
        // The whole submessage's size: its fields' sizes do not depend on their order.
        AppendVarint(&pending_, sub->ByteSizeLong());
        Encode(*sub);
        continue;
      }
      std::string scratch;
      const std::string& bytes = r->GetStringReference(m, f, &scratch);
      AppendVarint(&pending_, bytes.size());
      Flush();
      held_->refs.fetch_add(1, std::memory_order_relaxed);
      slices_.emplace_back(const_cast<char*>(bytes.data()), bytes.size(), Unhold, held_);
    }
  }

  grpc::ByteBuffer Finish() {
    Flush();
    return grpc::ByteBuffer(slices_.data(), slices_.size());
  }

 private:
  // The small bytes so far become a slice of their own (copied: they are small).
  void Flush() {
    if (pending_.empty()) return;
    slices_.emplace_back(pending_.data(), pending_.size());
    pending_.clear();
  }

  Held* const held_;
  const size_t min_;
  std::vector<grpc::Slice> slices_;
  std::string pending_;
};

}  // namespace

grpc::ByteBuffer EncodeAliasing(std::unique_ptr<Message> message, size_t min_alias_bytes) {
  auto* held = new Held(std::move(message));
  Encoder e(held, min_alias_bytes);
  e.Encode(*held->message);
  grpc::ByteBuffer wire = e.Finish();
  Unhold(held);  // the encoder's reference: the slices keep the message, if any aliases it
  return wire;
}

namespace {

// protobuf's own limit on nested messages and groups (CodedInputStream's default).
constexpr int kMaxDepth = 100;

bool ReadVarint(std::string_view all, size_t* pos, size_t end, uint64_t* v) {
  uint64_t r = 0;
  for (int i = 0; i < 10; ++i) {
    if (*pos >= end) return false;
    const auto b = uint8_t(all[(*pos)++]);
    r |= uint64_t(b & 0x7F) << (7 * i);
    if ((b & 0x80) == 0) return *v = r, true;
  }
  return false;
}

// Reads the fields of one message, or of a group's contents, and says what is wrong with them.
class FaultFinder {
 public:
  explicit FaultFinder(std::string_view all) : all_(all) {}

  // The fields in [*pos, end) as a `type` (nullptr: a group, whose fields are unknown: their
  // encoding alone is checked), named `path` ("" for the whole message); `group`: the number whose
  // end-group tag closes them (0: they run to `end`). Leaves *pos after what it read.
  std::string Fields(size_t* pos, size_t end, const Descriptor* type, const std::string& path,
                     int depth, uint32_t group) {
    const std::string where = path.empty() ? "the message" : path;
    std::map<uint32_t, int> seen;  // occurrences of each repeated field, for paths
    while (*pos < end) {
      const size_t at = *pos;
      uint64_t tag;
      if (!ReadVarint(all_, pos, end, &tag) || tag > UINT32_MAX) {
        return StrCat("the tag at byte ", at, " runs past the end of ", where);
      }
      const auto number = uint32_t(tag >> 3);
      const auto wire = uint32_t(tag & 7);
      if (number == 0)
        return StrCat("the tag at byte ", at, " has field number 0 (they start at 1)");
      const FieldDescriptor* f = type != nullptr ? type->FindFieldByNumber(int(number)) : nullptr;
      std::string name = f != nullptr ? f->name() : StrCat("field ", number);
      if (f != nullptr && f->is_repeated()) StrAppend(&name, "[", seen[number]++, "]");
      if (!path.empty()) name = StrCat(path, ".", name);
      switch (wire) {
        case 0: {
          uint64_t v;
          if (!ReadVarint(all_, pos, end, &v)) {
            return StrCat(name, ": its varint at byte ", at, " runs past the end of ", where);
          }
          break;
        }
        case 1:
        case 5: {
          const size_t n = wire == 1 ? 8 : 4;
          if (end - *pos < n) {
            return StrCat(name, ": its ", n, "-byte value at byte ", at, " runs past the end of ",
                          where);
          }
          *pos += n;
          break;
        }
        case 2: {
          uint64_t n;
          if (!ReadVarint(all_, pos, end, &n)) {
            return StrCat(name, ": its length at byte ", at, " runs past the end of ", where);
          }
          if (n > end - *pos) {
            return StrCat(name, " at byte ", at, " declares ", n, " bytes where ", end - *pos,
                          " remain in ", where);
          }
          const size_t begin = *pos;
          *pos += size_t(n);
          if (f == nullptr) break;
          if (f->type() == FieldDescriptor::TYPE_STRING &&
              f->file()->syntax() == google::protobuf::FileDescriptor::SYNTAX_PROTO3) {
            const std::string_view text = all_.substr(begin, size_t(n));
            if (const size_t bad = InvalidUtf8At(text); bad != kAllUtf8) {
              return fmt::format(
                  "{} is not UTF-8: byte {} of its {} is {:#04x} (a string field holds UTF-8 "
                  "text; bytes in another encoding must be converted)",
                  name, bad, n, uint8_t(text[bad]));
            }
          } else if (f->type() == FieldDescriptor::TYPE_MESSAGE) {
            if (depth + 1 > kMaxDepth) return TooDeep(name);
            size_t inner = begin;
            std::string fault = Fields(&inner, *pos, f->message_type(), name, depth + 1, 0);
            if (!fault.empty()) return fault;
          }
          break;
        }
        case 3: {
          if (depth + 1 > kMaxDepth) return TooDeep(name);
          std::string fault = Fields(pos, end, nullptr, name, depth + 1, number);
          if (!fault.empty()) return fault;
          break;
        }
        case 4:
          if (number == group) return {};
          return StrCat("the end-group tag at byte ", at, " (field ", number, ") closes no group");
        default:
          return StrCat(name, ": wire type ", wire, " at byte ", at,
                        " does not exist (protobuf's are 0 to 5)");
      }
    }
    if (group != 0) return StrCat(path, ": its group is never closed in the bytes that follow");
    return {};
  }

 private:
  static std::string TooDeep(const std::string& name) {
    return StrCat(name, " is nested deeper than protobuf's limit of ", kMaxDepth, " levels");
  }

  std::string_view all_;
};

}  // namespace

std::string WireFault(std::string_view bytes, const Descriptor& type) {
  size_t pos = 0;
  return FaultFinder(bytes).Fields(&pos, bytes.size(), &type, "", 0, 0);
}

absl::Status ParseMessage(const grpc::ByteBuffer& bytes, std::string_view what, Message* message) {
  {
    // The reader needs a buffer of its own: this one holds the same slices.
    grpc::ByteBuffer shared(bytes);
    grpc::ProtoBufferReader reader(&shared);
    // protobuf logs each string field that is not UTF-8: the call's own log line names it.
    google::protobuf::LogSilencer quiet;
    if (message->ParseFromZeroCopyStream(&reader)) return absl::OkStatus();
  }
  std::string flat;
  std::vector<grpc::Slice> slices;
  if (bytes.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices)
      flat.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  std::string fault = WireFault(flat, *message->GetDescriptor());
  if (fault.empty()) fault = "its bytes do not parse as one";
  return absl::InvalidArgumentError(
      StrCat(what, " is not a ", message->GetDescriptor()->full_name(), ": ", fault));
}

}  // namespace glimpse::server
