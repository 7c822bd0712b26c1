#include "env/episode/knobs.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <random>
#include <set>

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

// The knobs, template and language an episode on `backend` uses: its version's when the task has
// one for that backend, else task.json's.
struct Template {
  const std::vector<Knob>& knobs;
  const std::string& source;
  KnobLanguage language;
};

Template TemplateFor(const Task& task, std::string_view backend) {
  if (const auto it = task.variants.find(std::string(backend)); it != task.variants.end())
    return {it->second.knobs, it->second.template_source, KnobLanguage::kPython};
  return {task.knobs, task.template_source, KnobLanguage::kC};
}

}  // namespace

EditOutcome ApplyKnobs(const Task& task, const std::map<std::string, protocol::KnobValue>& values) {
  return ApplyKnobs(task, "", values);
}

EditOutcome ApplyKnobs(const Task& task, std::string_view backend,
                       const std::map<std::string, protocol::KnobValue>& values) {
  const Template tmpl = TemplateFor(task, backend);
  const std::vector<Knob>& knobs = tmpl.knobs;
  EditOutcome out;
  if (knobs.empty()) {
    out.error = "task " + task.id + " has no knob template" + (backend.empty() ? "" : " on " + std::string(backend));
    return out;
  }
  for (const auto& [name, given] : values) {
    const auto known =
        std::find_if(knobs.begin(), knobs.end(), [&name = name](const Knob& k) { return k.name == name; });
    if (known == knobs.end()) {
      std::string names;
      for (const Knob& k : knobs) names += (names.empty() ? "" : ", ") + k.name;
      out.error = "knobs: unknown knob '" + name + "' (task " + task.id + " has " + names + ")";
      return out;
    }
  }
  std::string source;
  for (const Knob& knob : knobs) {
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
    source += KnobLine(knob, chosen, tmpl.language);
  }
  out.source = source + tmpl.source;
  return out;
}

namespace {

protocol::KnobValue ToProtocol(const Knob::Value& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return *i;
  return std::get<std::string>(value);
}

std::size_t ProductSize(const std::vector<Knob>& knobs) {
  std::size_t n = 1;
  for (const Knob& knob : knobs) n *= knob.values.size();
  return n;
}

}  // namespace

std::vector<KnobCombination> AllKnobCombinations(const Task& task) { return AllKnobCombinations(task, ""); }

std::vector<KnobCombination> AllKnobCombinations(const Task& task, std::string_view backend) {
  const std::vector<Knob>& knobs = TemplateFor(task, backend).knobs;
  std::vector<KnobCombination> combos{KnobCombination{}};
  for (const Knob& knob : knobs) {
    std::vector<KnobCombination> next;
    for (const KnobCombination& partial : combos)
      for (const Knob::Value& v : knob.values) {
        KnobCombination extended = partial;
        extended[knob.name] = ToProtocol(v);
        next.push_back(std::move(extended));
      }
    combos = std::move(next);
  }
  return combos;
}

std::vector<KnobCombination> CoveringKnobCombinations(const Task& task, std::size_t limit, uint64_t seed) {
  return CoveringKnobCombinations(task, "", limit, seed);
}

std::vector<KnobCombination> CoveringKnobCombinations(const Task& task, std::string_view backend, std::size_t limit,
                                                      uint64_t seed) {
  const std::vector<Knob>& knobs = TemplateFor(task, backend).knobs;
  if (knobs.empty()) return {};
  if (ProductSize(knobs) <= limit) return AllKnobCombinations(task, backend);
  std::vector<KnobCombination> out;
  std::set<KnobCombination> seen;
  auto add = [&](KnobCombination c) {
    if (seen.insert(c).second) out.push_back(std::move(c));
  };
  KnobCombination defaults;
  for (const Knob& knob : knobs) defaults[knob.name] = ToProtocol(knob.default_value);
  add(defaults);
  std::size_t widest = 0;
  for (const Knob& knob : knobs) widest = std::max(widest, knob.values.size());
  for (std::size_t i = 0; i < widest; ++i) {
    KnobCombination diagonal;
    for (std::size_t k = 0; k < knobs.size(); ++k) {
      const Knob& knob = knobs[k];
      diagonal[knob.name] = ToProtocol(knob.values[(i + k) % knob.values.size()]);
    }
    add(diagonal);
  }
  std::mt19937_64 rng(seed);
  while (out.size() < limit) {
    KnobCombination drawn;
    for (const Knob& knob : knobs) drawn[knob.name] = ToProtocol(knob.values[rng() % knob.values.size()]);
    add(drawn);
  }
  return out;
}

std::string KnobCombinationText(const KnobCombination& combination) {
  std::string out;
  for (const auto& [name, value] : combination) {
    out += (out.empty() ? "" : " ") + name + "=";
    if (const auto* i = std::get_if<int64_t>(&value)) out += std::to_string(*i);
    else if (const auto* s = std::get_if<std::string>(&value)) out += *s;
    else out += Describe(value);
  }
  return out;
}

}  // namespace kernelgym
