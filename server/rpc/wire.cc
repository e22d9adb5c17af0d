#include "server/rpc/wire.h"

#include <fmt/format.h>
#include <google/protobuf/stubs/logging.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/slice.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/str.h"
#include "common/utf8.h"

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace glimpse::server {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::OneofDescriptor;
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

// libgrpc hands each slice from the encoding thread to the one that drops it, ordered by its
// own atomics, which ThreadSanitizer does not see (Debian's gRPC is not built with it). Without
// being told, TSan checks a gRPC thread's first touch of `refs` (before that touch's own acquire
// takes effect) against the encoder's construction of it, and reports a race. These two say
// what libgrpc does; in other builds they are nothing.
void HandOff([[maybe_unused]] Held* held) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(held);
#endif
}

void TakeOver([[maybe_unused]] Held* held) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(held);
#endif
}

void Unhold(void* p) {
  auto* held = static_cast<Held*>(p);
  TakeOver(held);
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
  HandOff(held);
  Unhold(held);  // the encoder's reference: the slices keep the message, if any aliases it
  return wire;
}

namespace {

// protobuf's own limit on nested messages and groups (CodedInputStream's default).
constexpr int kMaxDepth = 100;

// A varint of at most `max_bytes` bytes, its value mod 2^64, as protobuf reads one; false where
// it does not end within them (or before `end`). `byte_at(i)` is the message's byte i.
template <typename ByteAt>
bool ParseVarint(ByteAt byte_at, size_t* pos, size_t end, uint64_t* v, int max_bytes) {
  uint64_t r = 0;
  for (int i = 0; i < max_bytes; ++i) {
    if (*pos >= end) return false;
    const auto b = uint8_t(byte_at((*pos)++));
    r |= uint64_t(b & 0x7F) << (7 * i);
    if ((b & 0x80) == 0) return *v = r, true;
  }
  return false;
}

bool ReadVarint(std::string_view all, size_t* pos, size_t end, uint64_t* v, int max_bytes = 10) {
  return ParseVarint([all](size_t i) { return all[i]; }, pos, end, v, max_bytes);
}

// A tag as protobuf reads it: at most 5 bytes, its value mod 2^32.
bool ReadTag(std::string_view all, size_t* pos, size_t end, uint32_t* tag) {
  uint64_t v;
  if (!ReadVarint(all, pos, end, &v, 5)) return false;
  *tag = uint32_t(v);
  return true;
}

// The largest length protobuf's parser takes: INT32_MAX less the 16 bytes it reads past a
// buffer's end (its "slop").
constexpr uint64_t kMaxLength = uint64_t(INT32_MAX) - 16;

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
      uint32_t tag;
      if (!ReadTag(all_, pos, end, &tag)) {
        return end - at < 5 || !Continues(at, 5)
                   ? StrCat("the tag at byte ", at, " runs past the end of ", where)
                   : StrCat("the tag at byte ", at, " is longer than protobuf's 5 bytes");
      }
      const uint32_t number = tag >> 3;
      const uint32_t wire = tag & 7;
      if (number == 0)
        return StrCat("the tag at byte ", at, " has field number 0 (they start at 1)");
      const FieldDescriptor* f = type != nullptr ? type->FindFieldByNumber(int(number)) : nullptr;
      std::string name = f != nullptr ? f->name() : StrCat("field ", number);
      if (f != nullptr && f->is_repeated()) StrAppend(&name, "[", seen[number]++, "]");
      if (!path.empty()) name = StrCat(path, ".", name);
      switch (wire) {
        case 0: {
          const size_t value_at = *pos;
          uint64_t v;
          if (!ReadVarint(all_, pos, end, &v)) {
            return end - value_at < 10 || !Continues(value_at, 10)
                       ? StrCat(name, ": its varint at byte ", at, " runs past the end of ", where)
                       : StrCat(name, ": its varint at byte ", value_at,
                                " is longer than protobuf's 10 bytes");
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
          const size_t length_at = *pos;
          uint64_t n;
          if (!ReadVarint(all_, pos, end, &n, 5)) {
            return end - length_at < 5 || !Continues(length_at, 5)
                       ? StrCat(name, ": its length at byte ", length_at, " runs past the end of ",
                                where)
                       : StrCat(name, ": its length at byte ", length_at,
                                " is longer than protobuf's 5 bytes");
          }
          if (n > kMaxLength) {
            return StrCat(name, ": its length at byte ", length_at, " is ", n,
                          ", past protobuf's limit of ", kMaxLength);
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
  // Whether the `n` bytes from `at` all have their continuation bit set.
  bool Continues(size_t at, size_t n) const {
    for (size_t i = 0; i < n; ++i) {
      if ((uint8_t(all_[at + i]) & 0x80) == 0) return false;
    }
    return true;
  }

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

// ---- inline image bytes left in place -------------------------------------------------------

void WireBytes::CopyTo(size_t at, size_t n, uint8_t* dst) const {
  size_t i = size_t(std::upper_bound(starts_.begin(), starts_.end(), at) - starts_.begin()) - 1;
  while (n > 0) {
    const size_t off = at - starts_[i];
    const size_t take = std::min(n, slices_[i].size() - off);
    std::memcpy(dst, slices_[i].begin() + off, take);
    dst += take, at += take, n -= take, ++i;
  }
}

const uint8_t* WireBytes::Read(size_t at, size_t n, uint8_t* scratch) const {
  const size_t i =
      size_t(std::upper_bound(starts_.begin(), starts_.end(), at) - starts_.begin()) - 1;
  if (at - starts_[i] + n <= slices_[i].size()) return slices_[i].begin() + (at - starts_[i]);
  CopyTo(at, n, scratch);
  return scratch;
}

std::span<const uint8_t> WireBytes::Contiguous() {
  if (slices_.size() == 1) return {slices_[0].begin(), size_};
  if (joined_.size() != size_) {
    joined_.resize(size_);
    CopyTo(0, size_, joined_.data());
  }
  return joined_;
}

// A received message's slices, read by offset without joining them.
class WireReader {
 public:
  explicit WireReader(const grpc::ByteBuffer& bytes) {
    std::vector<grpc::Slice> all;
    if (!bytes.Dump(&all).ok()) return;
    for (grpc::Slice& s : all) {
      if (s.size() == 0) continue;
      starts_.push_back(size_);
      size_ += s.size();
      slices_.push_back(std::move(s));
    }
  }
  size_t size() const { return size_; }

  // A varint at *pos of at most `max_bytes` bytes, before `end` (protobuf's rules, as ReadVarint).
  bool Varint(size_t* pos, size_t end, uint64_t* v, int max_bytes) {
    return ParseVarint([this](size_t i) { return At(i); }, pos, end, v, max_bytes);
  }
  // Appends bytes [from, to) to `out`.
  void Append(size_t from, size_t to, std::string* out) {
    const size_t at = out->size();
    out->resize(at + (to - from));
    Bytes(from, to).CopyTo(0, to - from, reinterpret_cast<uint8_t*>(out->data() + at));
  }
  // Bytes [from, to) as slices of the same memory.
  WireBytes Bytes(size_t from, size_t to) const {
    WireBytes w;
    size_t i = Index(from);
    for (size_t at = from; at < to; ++i) {
      const size_t off = at - starts_[i];
      const size_t take = std::min(to - at, slices_[i].size() - off);
      w.starts_.push_back(w.size_);
      w.slices_.push_back(slices_[i].sub(off, off + take));
      w.size_ += take;
      at += take;
    }
    return w;
  }

 private:
  size_t Index(size_t at) const {
    return size_t(std::upper_bound(starts_.begin(), starts_.end(), at) - starts_.begin()) - 1;
  }
  uint8_t At(size_t at) {
    if (at - starts_[cur_] >= slices_[cur_].size()) cur_ = Index(at);
    return slices_[cur_].begin()[at - starts_[cur_]];
  }

  std::vector<grpc::Slice> slices_;
  std::vector<size_t> starts_;
  size_t size_ = 0;
  size_t cur_ = 0;
};

namespace {

struct Range {
  size_t begin = 0, end = 0;
};

// The fields of one message in [begin, end): each appended whole to `rest`, except length-delimited
// occurrences of field `keep`, whose payload is returned in `kept`; `kept_number` then says which
// of `keep` (one or two numbers) it was. False where the layout is not the plain one this path
// takes: a malformed field, a group, a second `keep` field, or another field of `type` in the
// oneof `exclusive` (a sibling protobuf would let replace the kept one).
bool Split(WireReader& r, size_t begin, size_t end, std::initializer_list<int> keep,
           const Descriptor* type, const OneofDescriptor* exclusive, std::string* rest, Range* kept,
           int* kept_number) {
  size_t pos = begin;
  *kept_number = 0;
  while (pos < end) {
    const size_t at = pos;
    uint64_t tag;
    if (!r.Varint(&pos, end, &tag, 5)) return false;
    const auto number = int(uint32_t(tag) >> 3);
    const auto wire = uint32_t(tag) & 7;
    const bool is_kept = wire == 2 && std::find(keep.begin(), keep.end(), number) != keep.end();
    if (number == 0) return false;
    uint64_t n = 0;
    switch (wire) {
      case 0:
        if (!r.Varint(&pos, end, &n, 10)) return false;
        break;
      case 1:
      case 5:
        n = wire == 1 ? 8 : 4;
        if (end - pos < n) return false;
        pos += n;
        break;
      case 2:
        if (!r.Varint(&pos, end, &n, 5) || n > kMaxLength || n > end - pos) return false;
        pos += n;
        break;
      default:
        return false;  // groups: protobuf's parse, whole
    }
    if (is_kept) {
      if (*kept_number != 0) return false;
      *kept_number = number;
      *kept = {pos - n, pos};
      continue;
    }
    if (exclusive != nullptr) {
      const FieldDescriptor* f = type->FindFieldByNumber(number);
      if (f != nullptr && f->containing_oneof() == exclusive) return false;
    }
    r.Append(at, pos, rest);
  }
  return true;
}

// The bytes field `data` of `type`, or nullptr.
const FieldDescriptor* DataField(const Descriptor* type) {
  const FieldDescriptor* f = type->FindFieldByName("data");
  return f != nullptr && f->type() == FieldDescriptor::TYPE_BYTES ? f : nullptr;
}

// The singular message fields that lead from `type` to its ImageRef: `image` (the single-call
// analyses), `header.image` (Analyze), `image.image` (an AnalyzeBatch image). Empty where there
// is none.
std::vector<const FieldDescriptor*> ImagePath(const Descriptor* type, int depth = 0) {
  for (const char* name : {"image", "header"}) {
    const FieldDescriptor* f = type->FindFieldByName(name);
    if (f == nullptr || f->is_repeated() || f->message_type() == nullptr) continue;
    if (f->message_type()->full_name() == "glimpse.v1.ImageRef") return {f};
    if (depth == 0) {
      std::vector<const FieldDescriptor*> below = ImagePath(f->message_type(), depth + 1);
      if (!below.empty()) {
        below.insert(below.begin(), f);
        return below;
      }
    }
  }
  return {};
}

}  // namespace

absl::Status ParseLeavingImageData(const grpc::ByteBuffer& bytes, std::string_view what,
                                   Message* message, WireBytes* data) {
  *data = WireBytes();
  const std::vector<const FieldDescriptor*> path = ImagePath(message->GetDescriptor());
  if (path.empty()) return ParseMessage(bytes, what, message);
  const Descriptor* ref_type = path.back()->message_type();
  const FieldDescriptor* encoded = ref_type->FindFieldByName("encoded");
  const FieldDescriptor* raw = ref_type->FindFieldByName("raw");
  WireReader r(bytes);
  // Down the path, each message's own fields aside (rests[i]) and the range of the next; then the
  // ImageRef's and the source's the same way, down to the source's `data`.
  std::vector<std::string> rests(path.size() + 2);
  Range range{0, r.size()};
  int number = 0;
  bool plain = true;
  const Descriptor* type = message->GetDescriptor();
  for (size_t i = 0; plain && i < path.size(); ++i) {
    plain = Split(r, range.begin, range.end, {path[i]->number()}, type, path[i]->containing_oneof(),
                  &rests[i], &range, &number) &&
            number != 0;
    type = path[i]->message_type();
  }
  const FieldDescriptor* source = nullptr;
  const FieldDescriptor* data_field = nullptr;
  if (plain) {
    plain = Split(r, range.begin, range.end, {encoded->number(), raw->number()}, ref_type,
                  encoded->containing_oneof(), &rests[path.size()], &range, &number) &&
            number != 0;
  }
  if (plain) {
    source = number == encoded->number() ? encoded : raw;
    data_field = DataField(source->message_type());
    plain = data_field != nullptr &&
            Split(r, range.begin, range.end, {data_field->number()}, source->message_type(),
                  nullptr, &rests[path.size() + 1], &range, &number) &&
            number != 0;
  }
  if (plain) {
    google::protobuf::LogSilencer quiet;
    message->Clear();
    // Each part parses as protobuf parses the whole: fields in order, the inline bytes aside.
    // (Each message's own fields first, then the field below it made: Split let through no oneof
    // sibling that could replace that field.)
    Message* m = message;
    for (size_t i = 0; plain && i < path.size(); ++i) {
      plain = m->MergeFromString(rests[i]);
      m = m->GetReflection()->MutableMessage(m, path[i]);
    }
    plain = plain && m->MergeFromString(rests[path.size()]) &&
            m->GetReflection()->MutableMessage(m, source)->MergeFromString(rests[path.size() + 1]);
  }
  if (!plain) return ParseMessage(bytes, what, message);
  *data = r.Bytes(range.begin, range.end);
  return absl::OkStatus();
}

}  // namespace glimpse::server
