// Tolerant field access for records read back from a store: a missing field, or a field of a
// record that is not an object, reads as null instead of throwing.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kernelgym::record {

inline const nlohmann::json& Field(const nlohmann::json& object, const char* key) {
  static const nlohmann::json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

// The string, or nullptr when the value is not a string.
inline const std::string* StringField(const nlohmann::json& object, const char* key) {
  const nlohmann::json& value = Field(object, key);
  return value.is_string() ? &value.get_ref<const std::string&>() : nullptr;
}

}  // namespace kernelgym::record
