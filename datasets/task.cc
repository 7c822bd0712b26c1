#include "datasets/task.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "core/digest.h"
#include "datasets/variants.h"

namespace kernelgym {
namespace {

using nlohmann::json;

bool IsAllowedCompileFlag(const std::string& flag);

// Thrown only inside this file; LoadTask turns it into TaskLoadResult::error.
struct FieldError {
  std::string field;
  std::string message;
};

[[noreturn]] void Fail(std::string field, std::string message) {
  throw FieldError{std::move(field), std::move(message)};
}

const json& Require(const json& obj, const std::string& key, const std::string& path) {
  if (!obj.is_object()) Fail(path, "must be an object");
  auto it = obj.find(key);
  if (it == obj.end()) Fail(path.empty() ? key : path + "." + key, "is required");
  return *it;
}

std::string RequireString(const json& obj, const std::string& key, const std::string& path) {
  const json& v = Require(obj, key, path);
  if (!v.is_string() || v.get<std::string>().empty())
    Fail(path.empty() ? key : path + "." + key, "must be a non-empty string");
  return v.get<std::string>();
}

double RequireNumber(const json& obj, const std::string& key, const std::string& path) {
  const json& v = Require(obj, key, path);
  if (!v.is_number()) Fail(path.empty() ? key : path + "." + key, "must be a number");
  return v.get<double>();
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Fail(path.filename().string(), "cannot be read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Tolerance ParseTolerance(const json& v, const std::string& path) {
  Tolerance t{RequireNumber(v, "atol", path), RequireNumber(v, "rtol", path)};
  if (t.atol < 0 || t.rtol < 0) Fail(path, "atol and rtol must be >= 0");
  if (t.atol == 0 && t.rtol == 0 && path.find("outputs") == std::string::npos)
    Fail(path, "atol and rtol are both 0: use a tolerance a float kernel can meet");
  return t;
}

using SizeMap = std::map<std::string, int64_t>;

// A bound that may name one of the task's sizes ("total": "M"): a number goes to `literal`, a
// size's name to `size`. Whether the number must be an integer is the caller's check.
void ParseBound(const json& obj, const std::string& key, const std::string& path, const SizeMap& sizes,
                double& literal, std::string& size) {
  const json& v = Require(obj, key, path);
  if (v.is_number_integer()) {
    literal = static_cast<double>(v.get<int64_t>());
  } else if (v.is_number()) {
    literal = v.get<double>();
  } else if (v.is_string()) {
    if (!sizes.count(v.get<std::string>()))
      Fail(path + "." + key, "names unknown size '" + v.get<std::string>() + "'");
    size = v.get<std::string>();
  } else {
    Fail(path + "." + key, "must be an integer or a size name");
  }
}

// What task.json says about an initializer. Checks that hang on the sizes (a permutation's pool
// against its element count, a randint range whose bound is a size) are ResolveInit's, so that
// they also run for every check set.
Initializer ParseInit(const json& v, const std::string& path, DType dtype, const SizeMap& sizes) {
  const std::string kind = RequireString(v, "kind", path);
  Initializer init;
  if (kind == "normal") {
    init.kind = Initializer::Kind::kNormal;
    init.a = RequireNumber(v, "mean", path);
    init.b = RequireNumber(v, "std", path);
    if (init.b <= 0) Fail(path + ".std", "must be > 0 (a constant input makes a degenerate task)");
  } else if (kind == "uniform") {
    init.kind = Initializer::Kind::kUniform;
    init.a = RequireNumber(v, "low", path);
    init.b = RequireNumber(v, "high", path);
    if (!(init.b > init.a)) Fail(path + ".high", "must be greater than low");
    if (v.contains("step")) {
      init.step = RequireNumber(v, "step", path);
      if (!(init.step > 0)) Fail(path + ".step", "must be > 0");
      if ((init.b - init.a) / init.step < 2)
        Fail(path + ".step", "leaves fewer than two values in [low, high) (a constant input: degenerate task)");
    }
  } else if (kind == "randint") {
    init.kind = Initializer::Kind::kRandInt;
    ParseBound(v, "low", path, sizes, init.a, init.a_size);
    ParseBound(v, "high", path, sizes, init.b, init.b_size);
    if (init.a != std::floor(init.a) || init.b != std::floor(init.b)) Fail(path, "randint bounds must be integers");
  } else if (kind == "permutation") {
    init.kind = Initializer::Kind::kPermutation;
    if (v.contains("high")) {
      ParseBound(v, "high", path, sizes, init.b, init.b_size);
      if (init.b_size.empty() && !v["high"].is_number_integer()) Fail(path + ".high", "must be an integer or a size name");
    } else {
      init.b_is_element_count = true;
    }
  } else if (kind == "partition") {
    init.kind = Initializer::Kind::kPartition;
    ParseBound(v, "total", path, sizes, init.b, init.b_size);
    if (init.b_size.empty() && !v["total"].is_number_integer()) Fail(path + ".total", "must be an integer or a size name");
  } else {
    Fail(path + ".kind", "unknown initializer '" + kind + "' (normal, uniform, randint, permutation, partition)");
  }
  const bool integer_kind = init.kind == Initializer::Kind::kRandInt || init.IsStructured();
  if (integer_kind && IsFloating(dtype)) Fail(path + ".kind", kind + " is for integer dtypes");
  if (!integer_kind && !IsFloating(dtype))
    Fail(path + ".kind", "integer inputs need randint, permutation or partition");
  return init;
}

// The bounds of `init` at `sizes` for a tensor of `elements` elements, and the checks that hang
// on them.
void ResolveInit(Initializer& init, const std::string& path, DType dtype, const SizeMap& sizes, int64_t elements) {
  if (!init.a_size.empty()) init.a = static_cast<double>(sizes.at(init.a_size));
  if (!init.b_size.empty()) init.b = static_cast<double>(sizes.at(init.b_size));
  auto bound = [](const std::string& size, double value) {
    std::ostringstream text;
    text << value;
    return size.empty() ? text.str() : size + " = " + text.str();
  };
  switch (init.kind) {
    case Initializer::Kind::kRandInt:
      if (!(init.b > init.a))
        Fail(path + ".high", "must be greater than low (" + bound(init.b_size, init.b) + " <= " + bound(init.a_size, init.a) + ")");
      if (init.b - init.a < 2) Fail(path, "randint with a single value is a constant input (degenerate task)");
      break;
    case Initializer::Kind::kPermutation:
      if (init.b_is_element_count) init.b = static_cast<double>(elements);
      if (init.b < static_cast<double>(elements))
        Fail(path + ".high", "must be at least the element count (" + std::to_string(elements) +
                                 ") for the values to be distinct (" + bound(init.b_size, init.b) + ")");
      if (elements < 2) Fail(path, "a permutation of one element is a constant input (degenerate task)");
      // Drawing shuffles the whole pool each time inputs are made: keep it a page pool, not a range.
      if (init.b > static_cast<double>(int64_t{1} << 26))
        Fail(path + ".high", "is more than 2^26 (a pool this large is drawn whole)");
      break;
    case Initializer::Kind::kPartition:
      if (init.b < 1) Fail(path + ".total", "must be positive");
      if (elements < 2) Fail(path, "a partition into one part is a constant input (degenerate task)");
      break;
    default:
      break;
  }
  const bool integer_kind = init.kind == Initializer::Kind::kRandInt || init.IsStructured();
  if (integer_kind && dtype == DType::kInt32 && (init.b > 2147483647.0 || init.a < -2147483648.0))
    Fail(path, "values do not fit in int32");
}

// `decl`'s shape (from its extents) and initializer bounds at `sizes`. `path` names the tensor
// ("inputs[2]"); a failure names the field.
TensorSpec ResolveTensor(const TensorSpec& decl, const SizeMap& sizes, const std::string& path) {
  TensorSpec spec = decl;
  if (!decl.extents.empty()) {
    spec.shape.clear();
    int64_t elements = 1;
    for (const Extent& e : decl.extents) {
      const int64_t extent = e.size.empty() ? e.literal : sizes.at(e.size);
      if (extent <= 0) Fail(path + ".shape", "extents must be positive");
      // NumElements() and NumBytes() multiply the extents: the product must fit in int64 bytes.
      if (extent > std::numeric_limits<int64_t>::max() / 8 / elements)
        Fail(path + ".shape", "has more elements than a 64-bit byte count can hold");
      elements *= extent;
      spec.shape.push_back(extent);
    }
  }
  if (spec.init) ResolveInit(*spec.init, path + ".init", spec.dtype, sizes, spec.NumElements());
  return spec;
}

// task.json's tensors as declared: shapes as extents, initializers with their size-named bounds.
// ResolveTensor gives them values.
std::vector<TensorSpec> ParseTensors(const json& root, const std::string& key, const SizeMap& sizes, bool is_input,
                                     const Tolerance& task_tolerance) {
  const json& list = Require(root, key, "");
  if (!list.is_array() || list.empty()) Fail(key, "must be a non-empty array");
  std::vector<TensorSpec> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = key + "[" + std::to_string(i) + "]";
    const json& t = list[i];
    TensorSpec spec;
    spec.name = RequireString(t, "name", path);
    const std::string dtype = RequireString(t, "dtype", path);
    auto parsed = ParseDType(dtype);
    if (!parsed) Fail(path + ".dtype", "unknown dtype '" + dtype + "' (float32, float64, int32, int64)");
    spec.dtype = *parsed;
    const json& shape = Require(t, "shape", path);
    if (!shape.is_array() || shape.empty()) Fail(path + ".shape", "must be a non-empty array");
    for (const json& d : shape) {
      if (d.is_number_integer()) {
        spec.extents.push_back({"", d.get<int64_t>()});
      } else if (d.is_string()) {
        if (!sizes.count(d.get<std::string>()))
          Fail(path + ".shape", "names unknown size '" + d.get<std::string>() + "'");
        spec.extents.push_back({d.get<std::string>(), 0});
      } else {
        Fail(path + ".shape", "entries must be size names or integers");
      }
    }
    if (is_input) {
      spec.init = ParseInit(Require(t, "init", path), path + ".init", spec.dtype, sizes);
    } else {
      spec.tolerance = t.contains("tolerance") ? ParseTolerance(t["tolerance"], path + ".tolerance")
                                               : task_tolerance;
    }
    for (const TensorSpec& prev : out)
      if (prev.name == spec.name) Fail(path + ".name", "duplicate tensor name '" + spec.name + "'");
    out.push_back(std::move(spec));
  }
  return out;
}

// ResolveShapes' work; a failure names the field ("sizes", "inputs[1].init.high", ...).
ShapeSet ResolveOrFail(const Task& task, const std::vector<SizeParam>& sizes) {
  SizeMap given;
  for (const SizeParam& s : sizes) {
    if (std::none_of(task.sizes.begin(), task.sizes.end(), [&](const SizeParam& t) { return t.name == s.name; }))
      Fail(s.name, "is not a size of the task");
    if (s.value <= 0) Fail(s.name, "must be a positive integer");
    if (!given.emplace(s.name, s.value).second) Fail(s.name, "is given twice");
  }
  ShapeSet set;
  for (const SizeParam& t : task.sizes) {
    auto it = given.find(t.name);
    if (it == given.end()) Fail(t.name, "is missing (a size set gives every size of the task)");
    set.sizes.push_back({t.name, it->second});
  }
  for (std::size_t i = 0; i < task.inputs.size(); ++i)
    set.inputs.push_back(ResolveTensor(task.inputs[i], given, "inputs[" + std::to_string(i) + "]"));
  for (std::size_t i = 0; i < task.outputs.size(); ++i)
    set.outputs.push_back(ResolveTensor(task.outputs[i], given, "outputs[" + std::to_string(i) + "]"));
  return set;
}

double IoBytes(const std::vector<TensorSpec>& inputs, const std::vector<TensorSpec>& outputs) {
  double bytes = 0;
  for (const auto* list : {&inputs, &outputs})
    for (const TensorSpec& t : *list) bytes += static_cast<double>(t.NumBytes());
  return bytes;
}

std::string FormatBytes(double bytes) {
  char text[64];  // "%.0f", not a cast to int64: several tensors together may hold more than int64 counts
  std::snprintf(text, sizeof(text), "%.0f", bytes);
  return text;
}

// `sizes` (every size of the task, each once) in task.json's order.
std::vector<SizeParam> InTaskOrder(const Task& task, const std::vector<SizeParam>& sizes) {
  std::vector<SizeParam> out;
  for (const SizeParam& t : task.sizes)
    for (const SizeParam& s : sizes)
      if (s.name == t.name) out.push_back(s);
  return out;
}

std::string SizesText(const std::vector<SizeParam>& sizes) {
  std::string out;
  for (const SizeParam& s : sizes) out += (out.empty() ? "" : ", ") + s.name + "=" + std::to_string(s.value);
  return out;
}

// task.json "check_sizes": [{"M": 96, ...}, ...], against the parsed task (sizes and tensors).
std::vector<std::vector<SizeParam>> ParseCheckSizes(const json& root, const Task& task, double timed_bytes) {
  if (!root.contains("check_sizes")) {
    if (task.has_cpu_version)
      Fail("check_sizes", "is required: at least one more size set ({\"" + task.sizes.front().name +
                              "\": ..., ...}) on which correctness is checked, so that a kernel which hard-codes "
                              "the timed sizes fails");
    return {};
  }
  const json& list = root["check_sizes"];
  if (!list.is_array()) Fail("check_sizes", "must be an array of objects {size name: value}");
  if (list.empty() && task.has_cpu_version) Fail("check_sizes", "must hold at least one size set");
  std::vector<std::vector<SizeParam>> sets;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string path = "check_sizes[" + std::to_string(i) + "]";
    const json& entry = list[i];
    if (!entry.is_object()) Fail(path, "must be an object {size name: value}");
    std::vector<SizeParam> given;
    for (const auto& item : entry.items()) {
      // (Named copies: clang 14 cannot capture structured bindings in a lambda.)
      const std::string name = item.key();
      const nlohmann::json& value = item.value();
      if (std::none_of(task.sizes.begin(), task.sizes.end(), [&](const SizeParam& s) { return s.name == name; }))
        Fail(path + "." + name, "is not a size of the task");
      if (!value.is_number_integer() || value.get<int64_t>() <= 0) Fail(path + "." + name, "must be a positive integer");
      given.push_back({name, value.get<int64_t>()});
    }
    for (const SizeParam& s : task.sizes)
      if (!entry.contains(s.name)) Fail(path, "lacks size '" + s.name + "' (a check set gives every size of the task)");
    ShapeSet set;
    try {
      set = ResolveOrFail(task, given);
    } catch (const FieldError& e) {
      Fail(path + ": " + e.field, e.message + " (at " + SizesText(InTaskOrder(task, given)) + ")");
    }
    if (set.sizes == task.sizes) Fail(path, "is the timed sizes: a check set must differ in at least one size");
    for (std::size_t j = 0; j < sets.size(); ++j)
      if (sets[j] == set.sizes) Fail(path, "repeats check_sizes[" + std::to_string(j) + "]");
    const double bytes = IoBytes(set.inputs, set.outputs);
    if (bytes > timed_bytes)
      Fail(path, "its inputs and outputs hold " + FormatBytes(bytes) + " bytes, more than at the timed sizes (" +
                     FormatBytes(timed_bytes) + "): a check set is for correctness only and must cost less");
    sets.push_back(std::move(set.sizes));
  }
  return sets;
}

std::vector<std::string> StringList(const json& v, const std::string& path) {
  if (!v.is_array()) Fail(path, "must be an array of strings");
  std::vector<std::string> out;
  for (const json& s : v) {
    if (!s.is_string()) Fail(path, "must be an array of strings");
    out.push_back(s.get<std::string>());
  }
  return out;
}

bool IsKnobName(const std::string& name) {
  if (name.empty() || !std::isupper(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!std::isupper(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)) && c != '_')
      return false;
  return true;
}

// True when `word` occurs in `text` as a whole identifier.
bool UsesIdentifier(const std::string& text, const std::string& word) {
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::size_t pos = text.find(word); pos != std::string::npos; pos = text.find(word, pos + 1)) {
    const bool left = pos == 0 || !ident(text[pos - 1]);
    const bool right = pos + word.size() == text.size() || !ident(text[pos + word.size()]);
    if (left && right) return true;
  }
  return false;
}

std::string ListValues(const std::vector<Knob::Value>& values) {
  std::string out;
  for (const Knob::Value& v : values) out += (out.empty() ? "" : ", ") + KnobValueText(v);
  return out;
}

// A value of the kind `ints` says, or a FieldError at `path`.
Knob::Value ParseKnobValue(const json& v, bool ints, const std::string& path, KnobLanguage language) {
  if (ints) {
    if (!v.is_number_integer()) Fail(path, "must be an integer (the knob's values are integers)");
    return v.get<int64_t>();
  }
  if (!v.is_string()) Fail(path, "must be a string (the knob's values are strings)");
  const std::string text = v.get<std::string>();
  if (text.empty()) Fail(path, "must be a non-empty string");
  if (language == KnobLanguage::kPython) {
    // Written as the literal "text": an identifier needs no escaping and cannot end the literal.
    const bool identifier = !std::isdigit(static_cast<unsigned char>(text[0])) &&
                            std::all_of(text.begin(), text.end(), [](char c) {
                              return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                            });
    if (!identifier) Fail(path, "'" + text + "' must be an identifier (A-Z, a-z, 0-9, _; not starting with a digit)");
    return text;
  }
  // The value becomes the rest of a #define line: one line, no continuation, no comment.
  for (char c : text)
    if (std::iscntrl(static_cast<unsigned char>(c)) || c == '\\')
      Fail(path, "'" + text + "' must be printable, on one line, without backslashes");
  if (text.find("//") != std::string::npos || text.find("/*") != std::string::npos)
    Fail(path, "'" + text + "' must not contain a comment");
  return text;
}

std::vector<Knob> ParseKnobs(const json& v, const Task& task, KnobLanguage language) {
  if (!v.is_object() || v.empty())
    Fail("knobs", "must be a non-empty object {\"NAME\": {\"values\": [...], \"default\": value}, ...}");
  std::vector<Knob> knobs;
  for (const auto& [name, spec] : v.items()) {
    const std::string path = "knobs." + name;
    if (!IsKnobName(name))
      Fail(path, "knob names must be UPPER_CASE C identifiers (A-Z, 0-9, _; starting with a letter)");
    for (const SizeParam& s : task.sizes)
      if (s.name == name) Fail(path, "is also a size name: its #define would rewrite the kernel's signature");
    for (const auto* list : {&task.inputs, &task.outputs})
      for (const TensorSpec& t : *list)
        if (t.name == name) Fail(path, "is also a tensor name: its #define would rewrite the kernel's signature");
    if (!spec.is_object()) Fail(path, "must be an object {\"values\": [...], \"default\": value}");
    for (const auto& [key, unused] : spec.items())
      if (key != "values" && key != "default") Fail(path + "." + key, "unknown field (values, default)");
    Knob knob;
    knob.name = name;
    const json& values = Require(spec, "values", path);
    if (!values.is_array() || values.empty())
      Fail(path + ".values", "must be a non-empty array of integers or of strings");
    if (!values[0].is_number_integer() && !values[0].is_string())
      Fail(path + ".values[0]", "must be an integer or a string");
    const bool ints = values[0].is_number_integer();
    for (std::size_t i = 0; i < values.size(); ++i) {
      Knob::Value value = ParseKnobValue(values[i], ints, path + ".values[" + std::to_string(i) + "]", language);
      for (const Knob::Value& prev : knob.values)
        if (prev == value) Fail(path + ".values", "duplicate value " + KnobValueText(value));
      knob.values.push_back(std::move(value));
    }
    knob.default_value = ParseKnobValue(Require(spec, "default", path), ints, path + ".default", language);
    if (std::find(knob.values.begin(), knob.values.end(), knob.default_value) == knob.values.end())
      Fail(path + ".default",
           KnobValueText(knob.default_value) + " is not one of the values (" + ListValues(knob.values) + ")");
    knobs.push_back(std::move(knob));
  }
  std::sort(knobs.begin(), knobs.end(), [](const Knob& a, const Knob& b) { return a.name < b.name; });
  return knobs;
}

void ReadKnobTemplate(const json& root, const std::filesystem::path& dir, const Task& task, KnobLanguage language,
                      std::vector<Knob>& knobs, std::string& template_source);

Task ParseTask(const json& root, const std::filesystem::path& dir) {
  Task task;
  task.dir = dir;
  task.id = RequireString(root, "id", "");
  const std::string expected_id = dir.parent_path().filename().string() + "/" + dir.filename().string();
  if (task.id != expected_id) Fail("id", "is '" + task.id + "' but the folder says '" + expected_id + "'");
  task.category = RequireString(root, "category", "");
  task.description = RequireString(root, "description", "");

  const json& sizes = Require(root, "sizes", "");
  if (!sizes.is_array()) Fail("sizes", "must be an array of {name, value}");
  std::map<std::string, int64_t> size_map;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const std::string path = "sizes[" + std::to_string(i) + "]";
    SizeParam p{RequireString(sizes[i], "name", path), 0};
    const json& value = Require(sizes[i], "value", path);
    if (!value.is_number_integer() || value.get<int64_t>() <= 0) Fail(path + ".value", "must be a positive integer");
    p.value = value.get<int64_t>();
    if (!size_map.emplace(p.name, p.value).second) Fail(path + ".name", "duplicate size '" + p.name + "'");
    task.sizes.push_back(p);
  }

  task.tolerance = ParseTolerance(Require(root, "tolerance", ""), "tolerance");
  task.inputs = ParseTensors(root, "inputs", size_map, true, task.tolerance);
  task.outputs = ParseTensors(root, "outputs", size_map, false, task.tolerance);
  for (const TensorSpec& o : task.outputs) {
    for (const TensorSpec& in : task.inputs)
      if (in.name == o.name) Fail("outputs", "'" + o.name + "' is also an input name");
  }
  ShapeSet timed = ResolveOrFail(task, task.sizes);
  task.inputs = std::move(timed.inputs);
  task.outputs = std::move(timed.outputs);

  task.flops = RequireNumber(root, "flops", "");
  task.bytes = RequireNumber(root, "bytes", "");
  if (task.flops < 0) Fail("flops", "must be >= 0");
  if (task.bytes <= 0) Fail("bytes", "must be > 0");
  const double io_bytes = IoBytes(task.inputs, task.outputs);
  // More than reading every input and writing every output once would raise the physical floor
  // above what an honest kernel needs, and flag it as implausible.
  if (task.bytes > io_bytes)
    Fail("bytes", "is more than the inputs and outputs hold (" + FormatBytes(io_bytes) +
                      "): it is the compulsory traffic, at most each input read and each output written once");

  task.signature = RequireString(root, "signature", "");
  const std::string expected = ExpectedSignature(task);
  if (task.signature != expected)
    Fail("signature", "is '" + task.signature + "' but inputs/outputs/sizes imply '" + expected + "'");
  task.check_sizes = ParseCheckSizes(root, task, io_bytes);

  if (root.contains("threads")) {
    if (!root["threads"].is_number_integer() || root["threads"].get<int>() < 1) Fail("threads", "must be an integer >= 1");
    task.threads = root["threads"].get<int>();
  }
  if (root.contains("trials")) {
    if (!root["trials"].is_number_integer() || root["trials"].get<int>() < 3) Fail("trials", "must be an integer >= 3");
    task.trials = root["trials"].get<int>();
  }
  if (root.contains("compile_flags")) task.compile_flags = StringList(root["compile_flags"], "compile_flags");
  for (const std::string& flag : task.compile_flags)
    if (!IsAllowedCompileFlag(flag))
      Fail("compile_flags", "'" + flag + "' is not allowed (optimization, code generation, -D/-U and warning flags only)");
  if (root.contains("policy")) {
    const json& p = root["policy"];
    if (!p.is_object()) Fail("policy", "must be an object");
    if (p.contains("allowed_headers"))
      task.policy.extra_allowed_headers = StringList(p["allowed_headers"], "policy.allowed_headers");
    if (p.contains("allowed_libraries"))
      task.policy.allowed_libraries = StringList(p["allowed_libraries"], "policy.allowed_libraries");
  }

  const std::string reference_file = root.contains("reference") ? RequireString(root, "reference", "") : "reference.py";
  const std::string starter_file = root.contains("starter") ? RequireString(root, "starter", "") : "starter.cpp";
  for (const auto& [field, file] : {std::pair{"reference", reference_file}, std::pair{"starter", starter_file}})
    if (file.find('/') != std::string::npos || file == "." || file == "..")
      Fail(field, "must be a file name inside the task folder, not a path");
  try {
    task.reference_source = ReadFile(dir / reference_file);
  } catch (const FieldError&) {
    Fail("reference", "file '" + reference_file + "' cannot be read");
  }
  try {
    task.starter_source = ReadFile(dir / starter_file);
  } catch (const FieldError&) {
    Fail("starter", "file '" + starter_file + "' cannot be read");
  }
  if (task.reference_source.find("def reference(") == std::string::npos)
    Fail("reference", "'" + reference_file + "' must define `def reference(...)`");

  ReadKnobTemplate(root, dir, task, KnobLanguage::kC, task.knobs, task.template_source);
  return task;
}

void ReadKnobTemplate(const json& root, const std::filesystem::path& dir, const Task& task, KnobLanguage language,
                      std::vector<Knob>& knobs, std::string& template_source) {
  if (root.contains("knobs")) {
    knobs = ParseKnobs(root["knobs"], task, language);
    const std::string template_file = root.contains("template") ? RequireString(root, "template", "")
                                      : language == KnobLanguage::kC ? "template.cpp"
                                                                      : "template.py";
    if (template_file.find('/') != std::string::npos || template_file == "." || template_file == "..")
      Fail("template", "must be a file name inside the task folder, not a path");
    try {
      template_source = ReadFile(dir / template_file);
    } catch (const FieldError&) {
      Fail("template", "file '" + template_file + "' cannot be read (a task with knobs needs its template)");
    }
    for (const Knob& knob : knobs)
      if (!UsesIdentifier(template_source, knob.name))
        Fail("knobs." + knob.name, "'" + template_file + "' never uses it");
  } else if (root.contains("template")) {
    Fail("template", "is given but the task declares no knobs");
  }
}

// Task files are trusted, but a flag that reads or writes files, loads plugins or talks to the
// linker has no business in a kernel's compile: allow only what changes code generation.
bool IsAllowedCompileFlag(const std::string& flag) {
  auto starts = [&](const char* prefix) { return flag.rfind(prefix, 0) == 0; };
  if (starts("-O") || starts("-march=") || starts("-mtune=") || starts("-std=") || starts("-D") || starts("-U") ||
      starts("-g"))
    return true;
  if (starts("-W")) return !starts("-Wl,") && !starts("-Wa,") && !starts("-Wp,");
  if (starts("-m")) return flag.size() > 2 && std::isalnum(static_cast<unsigned char>(flag[2]));
  if (starts("-f"))
    return !starts("-fplugin") && !starts("-fdump") && !starts("-fprofile") && !starts("-fauto-profile") &&
           !starts("-fcoverage") && !starts("-fdebug-prefix") && !starts("-ffile-prefix") &&
           !starts("-fmacro-prefix") && !starts("-fcallgraph-info") && !starts("-fstack-usage") &&
           !starts("-fopt-info") && !starts("-fdiagnostics");
  return false;
}

const char* CType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float";
    case DType::kFloat64: return "double";
    case DType::kInt32: return "int32_t";
    case DType::kInt64: return "int64_t";
  }
  return "?";
}

}  // namespace

std::string KnobValueText(const Knob::Value& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  return std::get<std::string>(value);
}

std::string KnobLine(const Knob& knob, const Knob::Value& value, KnobLanguage language) {
  if (language == KnobLanguage::kC) return "#define " + knob.name + " " + KnobValueText(value) + "\n";
  // The loader admits only identifiers as Python string values: quoting them needs no escapes.
  if (const auto* s = std::get_if<std::string>(&value)) return knob.name + " = \"" + *s + "\"\n";
  return knob.name + " = " + KnobValueText(value) + "\n";
}

std::string LoadKnobTemplate(const nlohmann::json& config, const std::filesystem::path& dir, const Task& task,
                             KnobLanguage language, std::vector<Knob>& knobs, std::string& template_source) {
  try {
    ReadKnobTemplate(config, dir, task, language, knobs, template_source);
  } catch (const FieldError& e) {
    knobs.clear();
    template_source.clear();
    return e.field + ": " + e.message;
  }
  return "";
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
  }
  return "?";
}

std::optional<DType> ParseDType(std::string_view name) {
  if (name == "float32") return DType::kFloat32;
  if (name == "float64") return DType::kFloat64;
  if (name == "int32") return DType::kInt32;
  if (name == "int64") return DType::kInt64;
  return std::nullopt;
}

std::size_t DTypeSize(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kInt32 ? 4 : 8;
}

bool IsFloating(DType dtype) { return dtype == DType::kFloat32 || dtype == DType::kFloat64; }

int64_t TensorSpec::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ExpectedSignature(const Task& task) {
  std::string sig = "void kernel(";
  bool first = true;
  auto arg = [&](const std::string& text) {
    if (!first) sig += ", ";
    sig += text;
    first = false;
  };
  for (const TensorSpec& t : task.inputs) arg(std::string("const ") + CType(t.dtype) + "* " + t.name);
  for (const TensorSpec& t : task.outputs) arg(std::string(CType(t.dtype)) + "* " + t.name);
  for (const SizeParam& s : task.sizes) arg("int64_t " + s.name);
  return sig + ")";
}

ShapeSet ResolveShapes(const Task& task, const std::vector<SizeParam>& sizes) {
  try {
    return ResolveOrFail(task, sizes);
  } catch (const FieldError& e) {
    throw std::invalid_argument(task.id + ": sizes " + SizesText(sizes) + ": " + e.field + ": " + e.message);
  }
}

std::vector<ShapeSet> CorrectnessShapeSets(const Task& task) {
  std::vector<ShapeSet> sets;
  sets.push_back({task.sizes, task.inputs, task.outputs});
  for (const std::vector<SizeParam>& sizes : task.check_sizes) sets.push_back(ResolveShapes(task, sizes));
  return sets;
}

bool Task::Supports(std::string_view backend) const {
  if (variants.count(std::string(backend))) return true;
  return has_cpu_version && !IsVariantBackend(backend);
}

const std::string& Task::StarterFor(std::string_view backend) const {
  auto it = variants.find(std::string(backend));
  return it == variants.end() ? starter_source : it->second.starter_source;
}

TaskLoadResult LoadTask(const std::filesystem::path& dir) {
  const std::filesystem::path file = dir / "task.json";
  TaskLoadResult result;
  std::ifstream in(file);
  if (!in) {
    result.error = file.string() + ": cannot be read";
    return result;
  }
  json root;
  try {
    root = json::parse(in);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number past a double's range
    result.error = file.string() + ": not valid JSON: " + e.what();
    return result;
  }
  try {
    result.task = ParseTask(root, dir);
    if (std::string problem = LoadVariants(*result.task); !problem.empty()) {
      result.task.reset();
      result.error = problem;
    } else {
      result.task->digest = TaskFolderDigest(dir);
    }
  } catch (const FieldError& e) {
    result.error = file.string() + ": " + e.field + ": " + e.message;
  } catch (const json::exception& e) {
    result.error = file.string() + ": " + e.what();
  }
  return result;
}

}  // namespace kernelgym
