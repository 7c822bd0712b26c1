// The task loader (datasets/task.h LoadTask) on an arbitrary task.json. LoadTask reads a folder,
// and there is no in-memory parser, so each input is written as task.json into a per-process
// temporary folder named after the input's `id` (so that the id check can pass), next to the
// minimal files a task needs: reference.py defining `reference`, starter.cpp, and template.cpp
// using every knob the input declares (so that knob templates load).
//
// Properties: no crash, leak or UB; a refused task is an error naming task.json; a loaded task
// keeps the invariants its users rely on: the signature is ExpectedSignature, tensors have
// positive extents and element counts, every check set resolves (ResolveShapes) to positive
// extents, knobs are sorted with non-empty domains that hold their default, and the knobs action
// applies its default combination and every covering combination.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "datasets/task.h"
#include "env/episode/knobs.h"
#include "tests/fuzz/fuzz_check.h"

namespace kernelgym {
namespace {

namespace fs = std::filesystem;

const fs::path& Base() {
  static const fs::path base = fs::temp_directory_path() / ("kernelgym-fuzz-task-" + std::to_string(getpid()));
  // Registered after `base` is built, so it runs before `base` is destroyed.
  static const bool removed_at_exit = std::atexit([] {
    std::error_code ec;
    fs::remove_all(Base(), ec);
  }) == 0;
  (void)removed_at_exit;
  return base;
}

bool SafeComponent(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 64) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  return true;
}

void Write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// The folder the input's id names ("suite/name" under Base()), or Base()/fuzz/task.
fs::path TaskDir(const nlohmann::json& root) {
  if (root.is_object() && root.contains("id") && root["id"].is_string()) {
    const std::string id = root["id"].get<std::string>();
    const std::size_t slash = id.find('/');
    if (slash != std::string::npos && SafeComponent(id.substr(0, slash)) && SafeComponent(id.substr(slash + 1)))
      return Base() / id.substr(0, slash) / id.substr(slash + 1);
  }
  return Base() / "fuzz" / "task";
}

void CheckTask(const Task& task) {
  FUZZ_CHECK(task.signature == ExpectedSignature(task), "the signature is the one the tensors imply");
  for (const auto* list : {&task.inputs, &task.outputs})
    for (const TensorSpec& t : *list) {
      FUZZ_CHECK(!t.shape.empty(), "tensor " + t.name + " has a shape");
      for (int64_t d : t.shape) FUZZ_CHECK(d > 0, "tensor " + t.name + " has positive extents");
      FUZZ_CHECK(t.NumElements() > 0, "tensor " + t.name + " has a positive element count");
    }
  // The check sets passed the loader, so resolving them is a value, never an exception.
  std::vector<ShapeSet> sets;
  try {
    sets = CorrectnessShapeSets(task);
  } catch (const std::exception& e) {
    FUZZ_CHECK(false, std::string("a loaded task's check sets resolve: ") + e.what());
  }
  FUZZ_CHECK(sets.size() == 1 + task.check_sizes.size(), "one shape set per check set, after the timed one");
  FUZZ_CHECK(!task.has_cpu_version || !task.check_sizes.empty(), "a task with a cpu version has a check set");
  for (std::size_t s = 1; s < sets.size(); ++s) {
    FUZZ_CHECK(sets[s].sizes != task.sizes, "a check set differs from the timed sizes");
    for (const auto* list : {&sets[s].inputs, &sets[s].outputs})
      for (const TensorSpec& t : *list)
        for (int64_t d : t.shape) FUZZ_CHECK(d > 0, "tensor " + t.name + " has positive extents in every check set");
  }
  for (std::size_t i = 0; i < task.knobs.size(); ++i) {
    const Knob& knob = task.knobs[i];
    FUZZ_CHECK(i == 0 || task.knobs[i - 1].name < knob.name, "knobs are sorted by name, no duplicates");
    FUZZ_CHECK(!knob.values.empty(), "knob " + knob.name + " has values");
    FUZZ_CHECK(std::find(knob.values.begin(), knob.values.end(), knob.default_value) != knob.values.end(),
               "knob " + knob.name + "'s default is one of its values");
  }
  if (task.knobs.empty()) return;
  const EditOutcome defaults = ApplyKnobs(task, {});
  FUZZ_CHECK(defaults.source.has_value(), "the default combination applies: " + defaults.error);
  for (const KnobCombination& c : CoveringKnobCombinations(task, 16, 0)) {
    const EditOutcome applied = ApplyKnobs(task, c);
    FUZZ_CHECK(applied.source.has_value(), "a covering combination applies: " + applied.error);
  }
}

}  // namespace
}  // namespace kernelgym

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kernelgym;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const nlohmann::json root = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  // Most inputs keep their id: the folder (and its fixed files) stays until the id changes.
  static fs::path last;
  const fs::path dir = TaskDir(root);
  std::error_code ec;
  if (dir != last) {
    if (!last.empty()) fs::remove_all(last.parent_path(), ec);
    fs::create_directories(dir, ec);
    FUZZ_CHECK(!ec, "cannot create " + dir.string() + ": " + ec.message());
    Write(dir / "reference.py", "import torch\n\ndef reference(x):\n    return x\n");
    Write(dir / "starter.cpp", "extern \"C\" void kernel() {}\n");
    last = dir;
  }
  Write(dir / "task.json", text);
  std::string knob_uses = "// knobs:";
  if (root.is_object() && root.contains("knobs") && root["knobs"].is_object())
    for (const auto& [name, spec] : root["knobs"].items()) knob_uses += " " + name;
  Write(dir / "template.cpp", knob_uses + "\nextern \"C\" void kernel() {}\n");

  const TaskLoadResult loaded = LoadTask(dir);
  FUZZ_CHECK(loaded.task.has_value() == loaded.error.empty(), "exactly one of a task and an error");
  if (loaded.task) CheckTask(*loaded.task);
  else FUZZ_CHECK(loaded.error.find("task.json") != std::string::npos || loaded.error.find(dir.string()) != std::string::npos,
                  "the error names the task's file: " + loaded.error);
  return 0;
}
