// Policy evaluation reports (`kernelgym evaluate`): per-task outcomes of one policy on a suite,
// the suite-level metrics that kernel-generation benchmarks quote, and their renderings — JSON
// (the record), Markdown (for people), SVG (the speedup distribution, a plot anyone can open) —
// plus a side-by-side comparison of several reports.
//
// Metrics (over the tasks of the report):
//   fast_p             the fraction of tasks whose final kernel is correct AND faster than the
//                      reference by more than p (speedup > p), for p in {0, 1.0, 1.2, 1.5, 2};
//                      fast_0 is the fraction correct
//   geomean_correct    the geometric mean of the speedup over the correct tasks (0 tasks: 0)
//   geomean_failed_1   over all tasks, a failed task counted as speedup 1 (the reference)
//   geomean_failed_0   over all tasks, a failed task counted as speedup 0 — so any failure makes it
//                      0: the strict reading
//   totals             steps, seconds, chat calls, prompt and completion tokens, cost
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kernelgym::evaluate {

// One episode of a policy on a task, as the policy runner saw it.
struct TaskOutcome {
  std::string task;
  bool correct = false;        // the final (submitted) kernel passed
  double speedup = 0;          // the final kernel's speedup over the reference (0 when not correct)
  double best_speedup = 0;     // the best speedup seen during the episode (correct kernels only)
  double starter_speedup = 0;  // the starter's, for reference
  // What the speedups are (docs/results.md `speedup_kind`): "measured" on the target's own clock,
  // or "estimated" (a pallas evaluation off a TPU: the TPU compiler's static estimate that the
  // step paid, never a measurement); "" when no speedup was paid.
  std::string speedup_kind;
  std::string status;          // the final evaluation's status ("ok", "incorrect", ...; "error: ..." when the episode failed)
  int64_t steps = 0;           // environment steps used
  double seconds = 0;          // wall time of the episode
  int64_t chat_calls = 0, prompt_tokens = 0, completion_tokens = 0;  // 0 for policies without a model
  int episode = 0;             // 0.. when a task is run several times (--episodes N)
};

struct Metrics {
  std::map<std::string, double> fast_p;  // "fast_0", "fast_1.0", "fast_1.2", "fast_1.5", "fast_2.0"
  double geomean_correct = 0, geomean_failed_1 = 0, geomean_failed_0 = 0;
  int tasks = 0, correct = 0;
  int64_t steps = 0, chat_calls = 0, prompt_tokens = 0, completion_tokens = 0;
  double seconds = 0;
  double cost = 0;  // prompt_tokens * price_in + completion_tokens * price_out (per million), 0 without prices
};

inline const std::vector<double> kFastP = {0, 1.0, 1.2, 1.5, 2.0};
std::string FastPKey(double p);  // 0 -> "fast_0", 1.2 -> "fast_1.2", 2 -> "fast_2.0"

// Prices in currency units per million tokens (0: not priced).
struct Prices {
  double prompt_per_million = 0, completion_per_million = 0;
};

Metrics ComputeMetrics(const std::vector<TaskOutcome>& outcomes, const Prices& prices = {});

struct Report {
  std::string policy;       // the policy's name (and options, e.g. "knob-search(budget=16)")
  std::string suite, backend;
  std::string created;      // ISO 8601 UTC
  nlohmann::json provenance = nlohmann::json::object();  // server, machine fingerprint, versions, seed
  std::vector<TaskOutcome> outcomes;
  Metrics metrics;          // ComputeMetrics(outcomes)
};

nlohmann::json ReportToJson(const Report& report);
// nullopt with `error` naming the field when the JSON is not a report.
std::optional<Report> ReportFromJson(const nlohmann::json& json, std::string& error);

// One report: the metrics, then a table with one row per task (correct, speedup, best, starter,
// steps, seconds, tokens).
std::string RenderMarkdown(const Report& report);
// Several reports side by side: one metrics table with a column per report, then one task table
// with each report's speedup per task (reports may cover different task sets: "—" where absent).
std::string RenderComparisonMarkdown(const std::vector<Report>& reports);
// The distribution of final speedups per report: for each report, its tasks' speedups sorted in
// decreasing order as a step line on a log-scale y axis (a failed task plotted at the axis floor),
// with a dashed line at 1.0x, a legend naming the policies and axis labels. Self-contained SVG.
std::string RenderSpeedupSvg(const std::vector<Report>& reports);

}  // namespace kernelgym::evaluate
