#include "env/episode/knobs.h"

#include <algorithm>
#include <cstdio>
#include <optional>

namespace kernelgym {
namespace {

std::string Allowed(const Knob& knob) {
  std::string out;
  for (const Knob::Value& v : knob.values) out += (out.empty() ? "" : ", ") + KnobValueText(v);
  return "allowed: " + out;
}

// A protocol value as the policy sent it, for messages.
std::string Describe(const protocol::KnobValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return "integer " + std::to_string(*i);
  if (const auto* d = std::get_if<double>(&value)) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.17g", *d);
    return std::string("number ") + buf;
  }
  return "string \"" + std::get<std::string>(value) + "\"";
}

// The knob's value for `given`, when it has the knob's kind. A double is never an integer value
// (even 8.0): integer knobs are sent as integers, and guessing would hide a client's bug.
std::optional<Knob::Value> AsKnobValue(const Knob& knob, const protocol::KnobValue& given) {
  const bool ints = std::holds_alternative<int64_t>(knob.values.front());
  if (ints) {
    if (const auto* i = std::get_if<int64_t>(&given)) return Knob::Value{*i};
  } else if (const auto* s = std::get_if<std::string>(&given)) {
    return Knob::Value{*s};
  }
  return std::nullopt;
}

}  // namespace

EditOutcome ApplyKnobs(const Task& task, const std::map<std::string, protocol::KnobValue>& values) {
  EditOutcome out;
  if (task.knobs.empty()) {
    out.error = "task " + task.id + " has no knob template";
    return out;
  }
  for (const auto& [name, given] : values) {
    const auto known =
        std::find_if(task.knobs.begin(), task.knobs.end(), [&](const Knob& k) { return k.name == name; });
    if (known == task.knobs.end()) {
      std::string names;
      for (const Knob& k : task.knobs) names += (names.empty() ? "" : ", ") + k.name;
      out.error = "knobs: unknown knob '" + name + "' (task " + task.id + " has " + names + ")";
      return out;
    }
  }
  std::string source;
  for (const Knob& knob : task.knobs) {
    Knob::Value chosen = knob.default_value;
    if (auto it = values.find(knob.name); it != values.end()) {
      const std::optional<Knob::Value> value = AsKnobValue(knob, it->second);
      const bool ints = std::holds_alternative<int64_t>(knob.values.front());
      if (!value) {
        out.error = "knobs: " + knob.name + ": expects " + (ints ? "an integer" : "a string") + ", got " +
                    Describe(it->second) + " (" + Allowed(knob) + ")";
        return out;
      }
      if (std::find(knob.values.begin(), knob.values.end(), *value) == knob.values.end()) {
        out.error = "knobs: " + knob.name + ": " + KnobValueText(*value) + " is not allowed (" + Allowed(knob) + ")";
        return out;
      }
      chosen = *value;
    }
    source += "#define " + knob.name + " " + KnobValueText(chosen) + "\n";
  }
  out.source = source + task.template_source;
  return out;
}

}  // namespace kernelgym
