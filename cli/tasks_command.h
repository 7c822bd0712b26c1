// `kernelgym tasks`: the task registry as a table (or JSON) — id, category, sizes, and the
// figures that say how much headroom a task has: the reference's time, the starter's speedup,
// and for templated tasks the best knob combination's speedup. The figures come from the
// suites' measured.json (recorded by the benchmarks, on the machine it names) or, with
// --measure, from evaluating every starter here and now.
#pragma once

#include <iosfwd>
#include <string>

#include "datasets/suite.h"

namespace kernelgym {

struct TasksCommandOptions {
  std::string suite = "all";
  std::string backend = "cpu";  // other backends list their versions' size sets, no timings
  bool as_json = false;
  bool measure = false;         // evaluate every starter now (cpu backend) instead of reading
  double budget_seconds = 1.0;  // timing budget per starter with `measure`
};

// Prints the listing to `out` (warnings to the log). 0: every task loaded; 1: some task folder
// did not load (listed as warnings); 2: unknown suite.
int RunTasksCommand(const TaskRegistry& registry, const std::filesystem::path& suites_root,
                    const TasksCommandOptions& options, std::ostream& out);

// "M=256 N=1024 K=1024": a task's sizes, in order.
std::string SizesText(const Task& task);

}  // namespace kernelgym
