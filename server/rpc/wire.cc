#include "server/rpc/wire.h"

#include <grpcpp/support/slice.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace glimpse::server {
namespace {

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

}  // namespace glimpse::server
