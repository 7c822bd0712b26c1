#include "datasets/measurements.h"

#include <fstream>
#include <nlohmann/json.hpp>

namespace kernelgym {
namespace {

using nlohmann::json;

double Number(const json& obj, const char* key, const std::string& path) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_number() || it->get<double>() < 0)
    throw std::runtime_error(path + "." + key + ": must be a non-negative number");
  return it->get<double>();
}

std::string Text(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

std::optional<Measurements> LoadMeasurements(const std::filesystem::path& file, std::string& error) {
  error.clear();
  std::ifstream in(file);
  if (!in) return std::nullopt;
  try {
    const json root = json::parse(in);
    Measurements m;
    m.machine = Text(root, "machine");
    m.date = Text(root, "date");
    m.command = Text(root, "command");
    const json& tasks = root.at("tasks");
    if (!tasks.is_object()) throw std::runtime_error("tasks: must be an object keyed by task id");
    for (const auto& [id, t] : tasks.items()) {
      const std::string path = "tasks." + id;
      TaskMeasurement tm;
      tm.reference_ms = Number(t, "reference_ms", path);
      tm.starter_ms = Number(t, "starter_ms", path);
      tm.starter_speedup = Number(t, "starter_speedup", path);
      if (t.contains("best_knob_speedup")) {
        tm.best_knob_speedup = Number(t, "best_knob_speedup", path);
        tm.best_knobs = Text(t, "best_knobs");
        tm.knob_combinations = static_cast<int>(Number(t, "knob_combinations", path));
      }
      m.tasks.emplace(id, std::move(tm));
    }
    return m;
  } catch (const std::exception& e) {  // json's parse and type errors, and ours
    error = file.string() + ": " + e.what();
    return std::nullopt;
  }
}

}  // namespace kernelgym
