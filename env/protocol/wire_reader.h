// Reading a result's wire tree field by field, for the FromWire functions of results.cc and
// task_info.cc: a missing or mistyped field becomes one sentence naming it as a client would
// write it ('observation.features[2] must be a number, not a string'). Internal to the protocol.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kernelgym::protocol::wire {

using nlohmann::json;

// Thrown by a Reader; Guarded turns it into the FromWire functions' `problem`.
struct BadField {
  std::string what;
};

inline std::string TypeName(const json& j) {
  switch (j.type()) {
    case json::value_t::null:
      return "nil";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a float";
    case json::value_t::string:
      return "a string";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "a map";
    case json::value_t::binary:
      return "bytes";
    default:
      return "nothing";
  }
}

// Reads the known fields of one result map. `path_` is the map's place in the result
// ("" for the top, "observation" for a nested one), so problems name the field as a client would
// write it: 'observation.features[2]'.
class Reader {
 public:
  Reader(const json& map, std::string path) : map_(map), path_(std::move(path)) {
    if (!map.is_object())
      throw BadField{(path_.empty() ? std::string("the result") : "field '" + path_ + "'") + " must be a map, not " +
                     TypeName(map)};
  }

  const json& Require(const std::string& key) const {
    auto it = map_.find(key);
    if (it == map_.end()) throw BadField{"missing field '" + Path(key) + "'"};
    return *it;
  }
  std::string String(const std::string& key) const {
    const json& v = Require(key);
    if (!v.is_string()) Wrong(key, "a string", v);
    return v.get<std::string>();
  }
  // An optional string field (one a server of an older build does not send): `fallback` when absent.
  std::string StringOr(const std::string& key, std::string fallback) const {
    return map_.contains(key) ? String(key) : fallback;
  }
  bool Bool(const std::string& key) const {
    const json& v = Require(key);
    if (!v.is_boolean()) Wrong(key, "a boolean", v);
    return v.get<bool>();
  }
  int64_t Int(const std::string& key) const { return IntValue(Require(key), Path(key)); }
  uint64_t Unsigned(const std::string& key) const {
    const json& v = Require(key);
    if (v.is_number_unsigned()) return v.get<uint64_t>();
    if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
    Wrong(key, "a non-negative integer", v);
  }
  double Number(const std::string& key) const { return NumberValue(Require(key), Path(key)); }
  const json& Map(const std::string& key) const {
    const json& v = Require(key);
    if (!v.is_object()) Wrong(key, "a map", v);
    return v;
  }
  std::vector<std::string> Strings(const std::string& key) const {
    const json& v = Array(key);
    std::vector<std::string> out;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_string()) Wrong(key + "[" + std::to_string(i) + "]", "a string", v[i]);
      out.push_back(v[i].get<std::string>());
    }
    return out;
  }
  // A map of string -> integer (health's `runners`); a bad value is named 'key.name'.
  std::map<std::string, int64_t> IntMap(const std::string& key) const {
    const json& v = Map(key);
    std::map<std::string, int64_t> out;
    for (auto it = v.begin(); it != v.end(); ++it) out[it.key()] = IntValue(it.value(), Path(key + "." + it.key()));
    return out;
  }
  std::vector<double> Numbers(const std::string& key) const {
    const json& v = Array(key);
    std::vector<double> out;
    for (std::size_t i = 0; i < v.size(); ++i)
      out.push_back(NumberValue(v[i], Path(key + "[" + std::to_string(i) + "]")));
    return out;
  }

  std::string Path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  const json& Array(const std::string& key) const {
    const json& v = Require(key);
    if (!v.is_array()) Wrong(key, "an array", v);
    return v;
  }

 private:
  [[noreturn]] void Wrong(const std::string& key, const std::string& want, const json& got) const {
    throw BadField{"field '" + Path(key) + "' must be " + want + ", not " + TypeName(got)};
  }
  static int64_t IntValue(const json& v, const std::string& path) {
    if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        throw BadField{"field '" + path + "' is out of range"};
      return static_cast<int64_t>(v.get<uint64_t>());
    }
    throw BadField{"field '" + path + "' must be an integer, not " + TypeName(v)};
  }
  static double NumberValue(const json& v, const std::string& path) {
    if (v.is_number()) return v.get<double>();
    throw BadField{"field '" + path + "' must be a number, not " + TypeName(v)};
  }

  const json& map_;
  std::string path_;
};

template <typename T, typename Read>
std::optional<T> Guarded(std::string& problem, Read read) {
  try {
    return read();
  } catch (const BadField& bad) {
    problem = bad.what;
    return std::nullopt;
  }
}

}  // namespace kernelgym::protocol::wire
