#include "env/protocol/msgpack_tree.h"

#include "core/text_safety.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kernelgym::protocol::detail {
namespace {

using nlohmann::json;

// Up to this many keys, duplicates are found by comparing every pair; past it (knob values, a
// fingerprint, hostile input) by sorting, so that a 4096-key map costs n log n, not n^2.
constexpr uint32_t kPairwiseDuplicateCheck = 16;

std::string Quoted(std::string_view key) { return QuotedText(key); }

}  // namespace

const msgpack::unpack_limit kUnpackLimits(/*array=*/1 << 16, /*map=*/1 << 12, /*str=*/kMaxMessageBytes,
                                          /*bin=*/kMaxMessageBytes, /*ext=*/0, /*depth=*/32);

std::string TypeName(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::NIL:
      return "nil";
    case msgpack::type::BOOLEAN:
      return "a boolean";
    case msgpack::type::POSITIVE_INTEGER:
    case msgpack::type::NEGATIVE_INTEGER:
      return "an integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return "a float";
    case msgpack::type::STR:
      return "a string";
    case msgpack::type::BIN:
      return "bytes";
    case msgpack::type::ARRAY:
      return "an array";
    case msgpack::type::MAP:
      return "a map";
    default:
      return "an extension";
  }
}

// Keys are checked in wire order, so that the key reported is the first bad one on the wire.
Fields::Fields(const msgpack::object& map, std::string where) : where_(std::move(where)) {
  if (map.type != msgpack::type::MAP) Fail("must be a map, not " + TypeName(map));
  if (map.via.map.size > kPairwiseDuplicateCheck) {
    AddLargeMap(map);
    return;
  }
  entries_.reserve(map.via.map.size);
  for (uint32_t i = 0; i < map.via.map.size; ++i) {
    const msgpack::object_kv& kv = map.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR) Fail("has a key that is " + TypeName(kv.key) + ", not a string");
    const std::string_view key(kv.key.via.str.ptr, kv.key.via.str.size);
    if (Lookup(key)) Fail("has the field " + Quoted(key) + " twice");
    entries_.push_back({key, &kv.val, false});
  }
}

// The same verdict as the pairwise loop: of the keys before the first non-string key, the repeat
// whose second occurrence comes first; else that non-string key.
void Fields::AddLargeMap(const msgpack::object& map) {
  const uint32_t size = map.via.map.size;
  entries_.reserve(size);
  uint32_t first_non_string = size;
  for (uint32_t i = 0; i < size; ++i) {
    const msgpack::object_kv& kv = map.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR) {
      first_non_string = i;
      break;
    }
    entries_.push_back({std::string_view(kv.key.via.str.ptr, kv.key.via.str.size), &kv.val, false});
  }
  std::vector<uint32_t> order(entries_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return entries_[a].key != entries_[b].key ? entries_[a].key < entries_[b].key : a < b;
  });
  uint32_t first_repeat = size;
  for (std::size_t i = 1; i < order.size(); ++i)
    if (entries_[order[i]].key == entries_[order[i - 1]].key) first_repeat = std::min(first_repeat, order[i]);
  if (first_repeat < size) Fail("has the field " + Quoted(entries_[first_repeat].key) + " twice");
  if (first_non_string < size)
    Fail("has a key that is " + TypeName(map.via.map.ptr[first_non_string].key) + ", not a string");
}

Fields::Entry* Fields::Lookup(std::string_view key) {
  for (Entry& e : entries_)
    if (e.key == key) return &e;
  return nullptr;
}

const msgpack::object* Fields::Find(std::string_view key) {
  Entry* e = Lookup(key);
  if (!e) return nullptr;
  e->used = true;
  return e->value;
}

const msgpack::object& Fields::Require(std::string_view key) {
  const msgpack::object* o = Find(key);
  if (!o) Fail("needs the field " + Quoted(key));
  return *o;
}

std::string Fields::String(std::string_view key) { return AsString(Require(key), key); }
int64_t Fields::Int(std::string_view key, int64_t min, int64_t max) { return AsInt(Require(key), key, min, max); }
uint64_t Fields::Unsigned(std::string_view key) { return AsUnsigned(Require(key), key); }

double Fields::Number(std::string_view key, double min) {
  const double x = AsNumber(Require(key), key);
  if (x < min) Fail("field " + Quoted(key) + " must be >= " + std::to_string(min));
  return x;
}

bool Fields::Bool(std::string_view key) {
  const msgpack::object& o = Require(key);
  if (o.type != msgpack::type::BOOLEAN) FieldType(key, "a boolean", o);
  return o.via.boolean;
}

const msgpack::object& Fields::Array(std::string_view key) {
  const msgpack::object& o = Require(key);
  if (o.type != msgpack::type::ARRAY) FieldType(key, "an array", o);
  return o;
}

std::vector<std::string> Fields::Strings(std::string_view key) {
  const msgpack::object& a = Array(key);
  std::vector<std::string> values;
  for (uint32_t i = 0; i < a.via.array.size; ++i)
    values.push_back(AsString(a.via.array.ptr[i], std::string(key) + "[" + std::to_string(i) + "]"));
  return values;
}

std::vector<uint64_t> Fields::Unsigneds(std::string_view key) {
  const msgpack::object& a = Array(key);
  std::vector<uint64_t> values;
  for (uint32_t i = 0; i < a.via.array.size; ++i)
    values.push_back(AsUnsigned(a.via.array.ptr[i], std::string(key) + "[" + std::to_string(i) + "]"));
  return values;
}

// A value that is not a string is reported in key order (the first such key by bytes), whatever
// the wire order.
std::map<std::string, std::string> Fields::StringMap(std::string_view key) {
  Fields entries(Require(key), where_ + "." + std::string(key));
  std::map<std::string, std::string> values;
  const Entry* not_string = nullptr;
  for (const Entry& e : entries.entries_) {
    if (e.value->type == msgpack::type::STR)
      values.emplace(e.key, std::string(e.value->via.str.ptr, e.value->via.str.size));
    else if (!not_string || e.key < not_string->key)
      not_string = &e;
  }
  if (not_string) entries.FieldType(not_string->key, "a string", *not_string->value);
  return values;
}

std::string Fields::StringOr(std::string_view key, std::string fallback) {
  const msgpack::object* o = Find(key);
  return o ? AsString(*o, key) : fallback;
}

int64_t Fields::IntOr(std::string_view key, int64_t fallback) {
  const msgpack::object* o = Find(key);
  return o ? AsInt(*o, key) : fallback;
}

double Fields::NumberOr(std::string_view key, double fallback) {
  const msgpack::object* o = Find(key);
  return o ? AsNumber(*o, key) : fallback;
}

bool Fields::BoolOr(std::string_view key, bool fallback) {
  const msgpack::object* o = Find(key);
  if (!o) return fallback;
  if (o->type != msgpack::type::BOOLEAN) FieldType(key, "a boolean", *o);
  return o->via.boolean;
}

std::string Fields::AsString(const msgpack::object& o, std::string_view key) const {
  if (o.type != msgpack::type::STR) FieldType(key, "a string", o);
  return std::string(o.via.str.ptr, o.via.str.size);
}

int64_t Fields::AsInt(const msgpack::object& o, std::string_view key, int64_t min, int64_t max) const {
  int64_t v = 0;
  if (o.type == msgpack::type::POSITIVE_INTEGER) {
    if (o.via.u64 > static_cast<uint64_t>(max)) Fail("field " + Quoted(key) + " is out of range");
    v = static_cast<int64_t>(o.via.u64);
  } else if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    v = o.via.i64;
  } else {
    FieldType(key, "an integer", o);
  }
  if (v < min || v > max)
    Fail("field " + Quoted(key) + " must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], not " +
         std::to_string(v));
  return v;
}

uint64_t Fields::AsUnsigned(const msgpack::object& o, std::string_view key) const {
  if (o.type != msgpack::type::POSITIVE_INTEGER) FieldType(key, "a non-negative integer", o);
  return o.via.u64;
}

double Fields::AsNumber(const msgpack::object& o, std::string_view key) const {
  double x = 0;
  if (o.type == msgpack::type::FLOAT32 || o.type == msgpack::type::FLOAT64)
    x = o.via.f64;
  else if (o.type == msgpack::type::POSITIVE_INTEGER)
    x = static_cast<double>(o.via.u64);
  else if (o.type == msgpack::type::NEGATIVE_INTEGER)
    x = static_cast<double>(o.via.i64);
  else
    FieldType(key, "a number", o);
  if (!std::isfinite(x)) Fail("field " + Quoted(key) + " must be finite");
  return x;
}

// In key order, as a sorted map of the fields would meet them, so the report does not depend on
// the sender's key order.
void Fields::Finish() const {
  const Entry* unknown = nullptr;
  for (const Entry& e : entries_)
    if (!e.used && (!unknown || e.key < unknown->key)) unknown = &e;
  if (unknown) Fail("has an unknown field " + Quoted(unknown->key));
}

void Fields::Fail(const std::string& what) const { throw DecodeFailure{where_ + ": " + what}; }

void Fields::FieldType(std::string_view key, std::string_view want, const msgpack::object& got) const {
  Fail("field " + Quoted(key) + " must be " + std::string(want) + ", not " + TypeName(got));
}

json ToJson(const msgpack::object& o, const std::string& where) {
  switch (o.type) {
    case msgpack::type::NIL:
      return nullptr;
    case msgpack::type::BOOLEAN:
      return o.via.boolean;
    case msgpack::type::POSITIVE_INTEGER:
      return o.via.u64;
    case msgpack::type::NEGATIVE_INTEGER:
      return o.via.i64;
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64:
      return o.via.f64;
    case msgpack::type::STR:
      return std::string(o.via.str.ptr, o.via.str.size);
    case msgpack::type::ARRAY: {
      json a = json::array();
      for (uint32_t i = 0; i < o.via.array.size; ++i) a.push_back(ToJson(o.via.array.ptr[i], where));
      return a;
    }
    case msgpack::type::MAP: {
      json m = json::object();
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        const msgpack::object_kv& kv = o.via.map.ptr[i];
        if (kv.key.type != msgpack::type::STR) throw DecodeFailure{where + ": map keys must be strings"};
        std::string key(kv.key.via.str.ptr, kv.key.via.str.size);
        if (m.contains(key)) throw DecodeFailure{where + ": has the key '" + key + "' twice"};
        m[std::move(key)] = ToJson(kv.val, where);
      }
      return m;
    }
    default:
      throw DecodeFailure{where + ": " + TypeName(o) + " is not allowed here"};
  }
}

void PackJson(Packer& pk, const json& j) {
  switch (j.type()) {
    case json::value_t::boolean:
      pk.pack(j.get<bool>());
      break;
    case json::value_t::number_unsigned:
      pk.pack(j.get<uint64_t>());
      break;
    case json::value_t::number_integer:
      pk.pack(j.get<int64_t>());
      break;
    case json::value_t::number_float:
      pk.pack(j.get<double>());
      break;
    case json::value_t::string:
      pk.pack(j.get_ref<const std::string&>());
      break;
    case json::value_t::array:
      pk.pack_array(static_cast<uint32_t>(j.size()));
      for (const json& e : j) PackJson(pk, e);
      break;
    case json::value_t::object:
      pk.pack_map(static_cast<uint32_t>(j.size()));
      for (const auto& [k, v] : j.items()) {
        pk.pack(k);
        PackJson(pk, v);
      }
      break;
    default:
      pk.pack_nil();
      break;  // null, and the kinds ToJson never yields (binary, discarded)
  }
}

// A key (or op) a client chose, quoted in an error message: cut to a few dozen bytes and made
// valid UTF-8, so that an error reply is never larger than a line, nor unreadable by a strict
// decoder, whatever the client sent.
std::string QuotedText(std::string_view text) {
  constexpr std::size_t kMaxQuoted = 64;
  const std::string_view kept = text.size() > kMaxQuoted ? Utf8Prefix(text, kMaxQuoted) : text;
  return "'" + ValidUtf8(kept) + (kept.size() < text.size() ? "...'" : "'");
}

void RequireUtf8Text(const msgpack::object& o, const std::string& where) {
  switch (o.type) {
    case msgpack::type::STR:
      if (!IsValidUtf8(std::string_view(o.via.str.ptr, o.via.str.size)))
        throw DecodeFailure{where + " is not valid UTF-8 (the protocol's text is UTF-8)"};
      return;
    case msgpack::type::ARRAY:
      for (uint32_t i = 0; i < o.via.array.size; ++i)
        RequireUtf8Text(o.via.array.ptr[i], where + "[" + std::to_string(i) + "]");
      return;
    case msgpack::type::MAP:
      for (uint32_t i = 0; i < o.via.map.size; ++i) {
        const msgpack::object_kv& kv = o.via.map.ptr[i];
        if (kv.key.type == msgpack::type::STR &&
            !IsValidUtf8(std::string_view(kv.key.via.str.ptr, kv.key.via.str.size)))
          throw DecodeFailure{"a key in " + where + " is not valid UTF-8 (the protocol's text is UTF-8)"};
        const std::string key = kv.key.type == msgpack::type::STR
                                    ? std::string(kv.key.via.str.ptr, kv.key.via.str.size)
                                    : std::string("?");
        const std::string quoted = QuotedText(key);
        RequireUtf8Text(kv.val, where + "." + quoted.substr(1, quoted.size() - 2));
      }
      return;
    default:
      return;
  }
}

}  // namespace kernelgym::protocol::detail

