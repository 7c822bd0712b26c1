// Internal to the protocol module: the msgpack helpers that the client codec (codec.cc) and the
// runner codec (runner_codec.cc) share. Besides those two codecs this is the only place that sees
// msgpack; nothing outside env/protocol may include it.
//
// Decoding here throws DecodeFailure; each codec's public Decode functions catch it and turn it
// into an error value, so it never leaves the protocol module.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <msgpack.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "env/protocol/messages.h"

namespace kernelgym::protocol::detail {

struct DecodeFailure {
  std::string message;
  ErrorCode code = ErrorCode::kBadRequest;  // the client protocol's error code; the runner protocol ignores it
};

// What one message may unpack to: at most kMaxMessageBytes of string or bytes, no extensions, and
// bounded arrays, maps and nesting (a result's raw timing samples are the largest arrays on the wire,
// one per timed round).
extern const msgpack::unpack_limit kUnpackLimits;

// "a string", "an integer", ... for messages that say what was found instead.
std::string TypeName(const msgpack::object& o);

// Throws DecodeFailure naming the first string (or map key) in `o` that is not valid UTF-8, by its
// path from `where`: every string a client sends is text, and text is UTF-8 everywhere — in the
// episode, in replies (which strict decoders refuse otherwise) and in the trajectory store.
void RequireUtf8Text(const msgpack::object& o, const std::string& where);

// Text a client chose (a key, an op), quoted for an error message: at most 64 bytes, valid UTF-8.
std::string QuotedText(std::string_view text);

// The fields of one msgpack map, read strictly: keys must be strings and unique, wrong types fail,
// and Finish fails on a field nobody read. Every failure names `where` (the op, or the op and a
// nested field). The map must outlive the Fields: entries point into it.
//
// A request's maps have a dozen keys or fewer, so the entries are a flat vector searched linearly;
// the server decodes every request through here.
class Fields {
 public:
  Fields(const msgpack::object& map, std::string where);
  Fields(const Fields&) = delete;
  Fields& operator=(const Fields&) = delete;

  // Lookups mark the field as read, for Finish.
  const msgpack::object* Find(std::string_view key);
  const msgpack::object& Require(std::string_view key);

  // Required fields. Int fails past [min, max]; Number must be finite and >= min.
  std::string String(std::string_view key);
  int64_t Int(std::string_view key, int64_t min = std::numeric_limits<int64_t>::min(),
              int64_t max = std::numeric_limits<int64_t>::max());
  uint64_t Unsigned(std::string_view key);
  double Number(std::string_view key, double min);
  bool Bool(std::string_view key);
  const msgpack::object& Array(std::string_view key);
  std::vector<std::string> Strings(std::string_view key);
  std::vector<uint64_t> Unsigneds(std::string_view key);
  std::map<std::string, std::string> StringMap(std::string_view key);

  // Optional fields: `fallback` when absent, checked as above when present (NumberOr: finite only).
  std::string StringOr(std::string_view key, std::string fallback);
  int64_t IntOr(std::string_view key, int64_t fallback);
  double NumberOr(std::string_view key, double fallback);
  bool BoolOr(std::string_view key, bool fallback);

  // A value already in hand (an entry of a free-form map, an array item), checked like a field
  // named `key`.
  std::string AsString(const msgpack::object& o, std::string_view key) const;
  int64_t AsInt(const msgpack::object& o, std::string_view key, int64_t min = std::numeric_limits<int64_t>::min(),
                int64_t max = std::numeric_limits<int64_t>::max()) const;
  uint64_t AsUnsigned(const msgpack::object& o, std::string_view key) const;

  // Fails on the first unread field in byte order of the keys.
  void Finish() const;

  [[noreturn]] void Fail(const std::string& what) const;
  [[noreturn]] void FieldType(std::string_view key, std::string_view want, const msgpack::object& got) const;
  const std::string& where() const { return where_; }

 private:
  struct Entry {
    std::string_view key;  // points into the map's key
    const msgpack::object* value;
    bool used;
  };

  Entry* Lookup(std::string_view key);
  void AddLargeMap(const msgpack::object& map);
  double AsNumber(const msgpack::object& o, std::string_view key) const;

  std::string where_;
  std::vector<Entry> entries_;  // in wire order
};

// A free-form msgpack tree (reward_config, a result tree) as JSON. Map keys must be strings and
// unique; nil, booleans, numbers, strings, arrays and maps only. Failures name `where`.
nlohmann::json ToJson(const msgpack::object& o, const std::string& where);

using Packer = msgpack::packer<msgpack::sbuffer>;

// The inverse of ToJson: object keys in the JSON's (byte) order, which is the canonical encoding
// the golden fixtures pin. Values ToJson never yields (binary, discarded) pack as nil.
void PackJson(Packer& pk, const nlohmann::json& j);

}  // namespace kernelgym::protocol::detail
