// Figures measured for each task by the benchmarks (bench/task_table.py, bench/knob_sweep.py),
// kept in `<suites root>/measured.json` so that `kernelgym tasks` can show a task's reference
// time and headroom without re-measuring. They describe the machine the file names, not the one
// reading it; `kernelgym tasks --measure` measures here instead.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

namespace kernelgym {

struct TaskMeasurement {
  double reference_ms = 0;    // the libtorch reference's median time per call
  double starter_ms = 0;      // the starter kernel's median time per call
  double starter_speedup = 0; // reference / starter, from the same timing window
  // The fastest combination of the task's knob template found by the full sweep, if swept.
  std::optional<double> best_knob_speedup;
  std::string best_knobs;     // "NAME=value ..." of that combination
  int knob_combinations = 0;  // how many combinations the sweep timed
};

struct Measurements {
  std::string machine;  // what it was measured on
  std::string date;     // when (YYYY-MM-DD)
  std::string command;  // how to measure it again
  std::map<std::string, TaskMeasurement> tasks;  // by task id
};

// The measurements file's name under a suites root.
inline constexpr const char* kMeasurementsFile = "measured.json";

// Reads a measurements file. A missing file is no measurements (nullopt, empty `error`); a
// malformed one is nullopt with `error` naming the file and the field.
[[nodiscard]] std::optional<Measurements> LoadMeasurements(const std::filesystem::path& file, std::string& error);

}  // namespace kernelgym
