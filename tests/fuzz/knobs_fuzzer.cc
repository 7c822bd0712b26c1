// The knob actions: protocol::ParseKnobList (the command lines' "A=1,B=exp_poly"),
// protocol::KnobValueFromJson / KnobValueToJson (a tuner's or a stored JSON value), and
// env/episode/knobs.h (ApplyKnobs, CoveringKnobCombinations, KnobCombinationText) on a task whose
// knob domains are drawn from the input.
//
// Properties: no crash, leak or UB; ParseKnobList refuses exactly the lists with an item that is
// not NAME=value, and reading its own output back gives the same values; KnobValueFromJson keeps
// the number or string it was given; ApplyKnobs gives exactly the #define lines of the chosen (or
// default) values before the template, or an error when a name is unknown or a value is of the
// wrong kind or outside the domain; every covering combination is a point of the domain that
// applies, the sample covers every value, and the whole product is returned when it fits.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "env/episode/knobs.h"
#include "tests/fuzz/fuzz_check.h"

namespace kernelgym {
namespace {

using protocol::KnobValue;

void CheckKnobList(const std::string& text) {
  bool well_formed = true;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) well_formed = false;
    start = comma + 1;
  }
  const auto values = protocol::ParseKnobList(text);
  FUZZ_CHECK(values.has_value() == well_formed, "ParseKnobList accepts exactly the NAME=value lists: '" + text + "'");
  if (!values) return;
  std::string again;
  for (const auto& [name, value] : *values) again += (again.empty() ? "" : ",") + name + "=" + protocol::KnobValueText(value);
  const auto reread = protocol::ParseKnobList(again);
  FUZZ_CHECK(reread && *reread == *values, "ParseKnobList reads its own output back: '" + again + "'");
}

void CheckKnobJson(const nlohmann::json& j) {
  const std::optional<KnobValue> value = protocol::KnobValueFromJson(j);
  if (j.is_string()) {
    FUZZ_CHECK(value && std::get<std::string>(*value) == j.get<std::string>(), "a JSON string is a string value");
  } else if (j.is_number_unsigned()) {
    // Either the same integer, or refused (past int64's range): never another number.
    if (value)
      FUZZ_CHECK(std::holds_alternative<int64_t>(*value) && std::get<int64_t>(*value) >= 0 &&
                     static_cast<uint64_t>(std::get<int64_t>(*value)) == j.get<uint64_t>(),
                 "KnobValueFromJson changed " + j.dump());
  } else if (j.is_number_integer()) {
    FUZZ_CHECK(value && std::get<int64_t>(*value) == j.get<int64_t>(), "a JSON integer is an integer value");
  } else if (j.is_number_float()) {
    FUZZ_CHECK(value && std::get<double>(*value) == j.get<double>(), "a JSON float is a float value");
  } else {
    FUZZ_CHECK(!value, "only numbers and strings are knob values: " + j.dump());
  }
  if (value) FUZZ_CHECK(protocol::KnobValueFromJson(protocol::KnobValueToJson(*value)) == value, "KnobValueToJson round trip");
}

KnobValue ConsumeValue(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 2)) {
    case 0: return in.ConsumeIntegralInRange<int64_t>(-4, 64);
    case 1: return in.ConsumeFloatingPoint<double>();
    default: return in.ConsumeRandomLengthString(12);
  }
}

// A task with up to five knobs (sorted by name, non-empty domains without duplicates, a default
// in the domain: what the task loader guarantees) and a template.
Task ConsumeTask(FuzzedDataProvider& in) {
  Task task;
  task.id = "fuzz/knobs";
  std::map<std::string, Knob> knobs;
  for (int n = in.ConsumeIntegralInRange(0, 5); n > 0; --n) {
    Knob knob;
    knob.name = in.ConsumeRandomLengthString(8);
    const bool ints = in.ConsumeBool();
    for (int v = in.ConsumeIntegralInRange(1, 6); v > 0; --v) {
      Knob::Value value = ints ? Knob::Value{in.ConsumeIntegralInRange<int64_t>(-4, 64)}
                               : Knob::Value{in.ConsumeRandomLengthString(8)};
      if (std::find(knob.values.begin(), knob.values.end(), value) == knob.values.end()) knob.values.push_back(value);
    }
    knob.default_value = knob.values[in.ConsumeIntegralInRange<std::size_t>(0, knob.values.size() - 1)];
    knobs.emplace(knob.name, std::move(knob));
  }
  for (auto& [name, knob] : knobs) task.knobs.push_back(std::move(knob));
  task.template_source = in.ConsumeRandomLengthString(64);
  return task;
}

// A protocol value as a task's knob value: doubles never are one.
std::optional<Knob::Value> AsKnob(const KnobValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return Knob::Value{*i};
  if (const auto* s = std::get_if<std::string>(&value)) return Knob::Value{*s};
  return std::nullopt;
}

// What ApplyKnobs must give: nullopt when any given value is not allowed.
std::optional<std::string> ModelKnobs(const Task& task, const std::map<std::string, KnobValue>& values) {
  if (task.knobs.empty()) return std::nullopt;
  for (const auto& [name, value] : values)
    if (std::none_of(task.knobs.begin(), task.knobs.end(), [&name = name](const Knob& k) { return k.name == name; }))
      return std::nullopt;
  std::string source;
  for (const Knob& knob : task.knobs) {
    Knob::Value chosen = knob.default_value;
    if (auto it = values.find(knob.name); it != values.end()) {
      const std::optional<Knob::Value> given = AsKnob(it->second);
      if (!given || given->index() != knob.values.front().index() ||
          std::find(knob.values.begin(), knob.values.end(), *given) == knob.values.end())
        return std::nullopt;
      chosen = *given;
    }
    source += "#define " + knob.name + " " + KnobValueText(chosen) + "\n";
  }
  return source + task.template_source;
}

void CheckKnobs(FuzzedDataProvider& in) {
  const Task task = ConsumeTask(in);
  std::map<std::string, KnobValue> values;
  for (int n = in.ConsumeIntegralInRange(0, 6); n > 0; --n) {
    const bool known = !task.knobs.empty() && in.ConsumeBool();
    const std::string name = known ? task.knobs[in.ConsumeIntegralInRange<std::size_t>(0, task.knobs.size() - 1)].name
                                   : in.ConsumeRandomLengthString(8);
    if (known && in.ConsumeBool()) {  // a value from the domain: the interesting case
      const Knob& knob = *std::find_if(task.knobs.begin(), task.knobs.end(), [&](const Knob& k) { return k.name == name; });
      const Knob::Value& v = knob.values[in.ConsumeIntegralInRange<std::size_t>(0, knob.values.size() - 1)];
      values[name] = std::holds_alternative<int64_t>(v) ? KnobValue{std::get<int64_t>(v)} : KnobValue{std::get<std::string>(v)};
    } else {
      values[name] = ConsumeValue(in);
    }
  }
  const EditOutcome out = ApplyKnobs(task, values);
  FUZZ_CHECK(out.source.has_value() == out.error.empty(), "exactly one of a source and an error");
  const std::optional<std::string> expected = ModelKnobs(task, values);
  FUZZ_CHECK(out.source == expected, "ApplyKnobs differs from the model: " + out.error);

  const std::size_t limit = in.ConsumeIntegralInRange<std::size_t>(0, 40);
  const std::vector<KnobCombination> sample = CoveringKnobCombinations(task, limit, in.ConsumeIntegral<uint64_t>());
  if (task.knobs.empty()) {
    FUZZ_CHECK(sample.empty(), "a task without knobs has no combinations");
    return;
  }
  std::size_t product = 1;
  for (const Knob& knob : task.knobs) product *= knob.values.size();
  FUZZ_CHECK(product <= limit ? sample.size() == product : sample.size() >= limit,
             "the sample is the whole product when it fits, else at least `limit`");
  std::set<KnobCombination> distinct(sample.begin(), sample.end());
  FUZZ_CHECK(distinct.size() == sample.size(), "no combination twice");
  std::map<std::string, std::set<std::size_t>> seen;  // knob -> value indices met
  for (const KnobCombination& combination : sample) {
    FUZZ_CHECK(combination.size() == task.knobs.size(), "a combination sets every knob");
    const EditOutcome applied = ApplyKnobs(task, combination);
    FUZZ_CHECK(applied.source.has_value(), "a sampled combination applies: " + applied.error);
    for (const Knob& knob : task.knobs) {
      const auto at = std::find(knob.values.begin(), knob.values.end(), AsKnob(combination.at(knob.name)));
      if (at != knob.values.end()) seen[knob.name].insert(at - knob.values.begin());
    }
    std::string text;
    for (const auto& [name, value] : combination) text += (text.empty() ? "" : " ") + name + "=" + protocol::KnobValueText(value);
    FUZZ_CHECK(KnobCombinationText(combination) == text, "KnobCombinationText is NAME=value in name order");
  }
  for (const Knob& knob : task.knobs)
    FUZZ_CHECK(seen[knob.name].size() == knob.values.size(), "the sample covers every value of knob '" + knob.name + "'");
}

}  // namespace
}  // namespace kernelgym

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kernelgym;
  FuzzedDataProvider in(data, size);
  CheckKnobList(in.ConsumeRandomLengthString(256));
  const nlohmann::json j = nlohmann::json::parse(in.ConsumeRandomLengthString(256), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) {
    CheckKnobJson(j);
    if (j.is_structured())
      for (const nlohmann::json& e : j) CheckKnobJson(e);
  }
  CheckKnobs(in);
  return 0;
}
