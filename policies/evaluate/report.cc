// Evaluation reports: metrics, the JSON record and the Markdown / SVG renderings (see report.h).
//
// Samples: every TaskOutcome is one sample. When a task was run several times (--episodes N) each
// episode counts on its own, in the fractions as in the geometric means, so a report of N episodes
// over T tasks has tasks == N * T. This keeps the metrics a plain function of the outcome list
// (no averaging choice hidden inside) and matches how the episodes were run: independently.
//
// A "timed" outcome is a correct one with a finite speedup > 0. Only timed outcomes count for
// fast_p and the geomeans; a correct kernel without a timing (speedup 0) still counts in `correct`,
// so fast_0 can be below correct / tasks. Everything else is "failed" (1x or 0x in the geomeans).
#include "policies/evaluate/report.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <limits>
#include <set>
#include <utility>

namespace kernelgym::evaluate {
namespace {

using nlohmann::json;

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char buffer[256];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(buffer, sizeof(buffer), format, args);
  va_end(args);
  return std::string(buffer, std::clamp(n, 0, static_cast<int>(sizeof(buffer)) - 1));
}

bool Timed(const TaskOutcome& o) { return o.correct && std::isfinite(o.speedup) && o.speedup > 0; }

double GeometricMean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum_log = 0;
  for (double v : values) sum_log += std::log(v);
  return std::exp(sum_log / static_cast<double>(values.size()));
}

// ---- JSON -------------------------------------------------------------------------------------
//
// Layout (all fields required; unknown fields are ignored so older readers accept newer files):
//   {"policy": str, "suite": str, "backend": str, "created": str, "provenance": {...},
//    "metrics": {"fast_p": {"fast_0": num, ...}, "geomean_correct": num, "geomean_failed_1": num,
//                "geomean_failed_0": num, "tasks": int, "correct": int, "steps": int,
//                "seconds": num, "chat_calls": int, "prompt_tokens": int,
//                "completion_tokens": int, "cost": num},
//    "outcomes": [{"task": str, "episode": int, "correct": bool, "speedup": num,
//                  "best_speedup": num, "starter_speedup": num, "status": str, "steps": int,
//                  "seconds": num, "chat_calls": int, "prompt_tokens": int,
//                  "completion_tokens": int, "speedup_kind": str (optional: "measured",
//                  "estimated" or "", absent in older files)}, ...]}

json OutcomeToJson(const TaskOutcome& o) {
  return {{"task", o.task},
          {"episode", o.episode},
          {"correct", o.correct},
          {"speedup", o.speedup},
          {"best_speedup", o.best_speedup},
          {"starter_speedup", o.starter_speedup},
          {"status", o.status},
          {"steps", o.steps},
          {"seconds", o.seconds},
          {"chat_calls", o.chat_calls},
          {"prompt_tokens", o.prompt_tokens},
          {"completion_tokens", o.completion_tokens},
          {"speedup_kind", o.speedup_kind}};
}

json MetricsToJson(const Metrics& m) {
  return {{"fast_p", m.fast_p},
          {"geomean_correct", m.geomean_correct},
          {"geomean_failed_1", m.geomean_failed_1},
          {"geomean_failed_0", m.geomean_failed_0},
          {"tasks", m.tasks},
          {"correct", m.correct},
          {"steps", m.steps},
          {"seconds", m.seconds},
          {"chat_calls", m.chat_calls},
          {"prompt_tokens", m.prompt_tokens},
          {"completion_tokens", m.completion_tokens},
          {"cost", m.cost}};
}

// Reads the fields of one JSON object; the first problem is kept in `error` as "<path>: <what>",
// and every later read is a no-op, so a parser can read all fields and check ok() once.
class FieldReader {
 public:
  FieldReader(const json& object, std::string prefix, std::string& error)
      : object_(object), prefix_(std::move(prefix)), error_(error) {}

  bool ok() const { return ok_; }
  std::string Path(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }

  const json* Field(const std::string& key) {
    if (!ok_) return nullptr;
    const auto it = object_.find(key);
    if (it == object_.end()) return Fail(key, "missing");
    return &*it;
  }
  void String(const std::string& key, std::string& out) {
    const json* v = Field(key);
    if (v && !v->is_string()) Fail(key, "must be a string");
    if (ok_ && v) out = v->get<std::string>();
  }
  void Bool(const std::string& key, bool& out) {
    const json* v = Field(key);
    if (v && !v->is_boolean()) Fail(key, "must be a boolean");
    if (ok_ && v) out = v->get<bool>();
  }
  void Number(const std::string& key, double& out) {
    const json* v = Field(key);
    if (v && !v->is_number()) Fail(key, "must be a number");
    if (ok_ && v) out = v->get<double>();
  }
  template <typename Int>
  void Integer(const std::string& key, Int& out) {
    if (const json* v = Field(key)) {
      if (!v->is_number_integer()) {
        Fail(key, "must be an integer");
      } else if (v->is_number_unsigned() ? v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<Int>::max())
                                         : v->get<int64_t>() < static_cast<int64_t>(std::numeric_limits<Int>::min()) ||
                                               v->get<int64_t>() > static_cast<int64_t>(std::numeric_limits<Int>::max())) {
        Fail(key, "out of range");
      } else {
        out = v->get<Int>();
      }
    }
  }
  const json* Object(const std::string& key) {
    const json* v = Field(key);
    return v && !v->is_object() ? Fail(key, "must be an object") : v;
  }
  const json* Array(const std::string& key) {
    const json* v = Field(key);
    return v && !v->is_array() ? Fail(key, "must be an array") : v;
  }

 private:
  const json* Fail(const std::string& key, const std::string& what) {
    if (ok_) error_ = Path(key) + ": " + what;
    ok_ = false;
    return nullptr;
  }

  const json& object_;
  std::string prefix_;
  std::string& error_;
  bool ok_ = true;
};

bool MetricsFromJson(const json& j, Metrics& m, std::string& error) {
  FieldReader r(j, "metrics", error);
  if (const json* fast_p = r.Object("fast_p")) {
    for (const auto& [key, value] : fast_p->items()) {
      if (!value.is_number()) {
        error = "metrics.fast_p." + key + ": must be a number";
        return false;
      }
      m.fast_p[key] = value.get<double>();
    }
  }
  r.Number("geomean_correct", m.geomean_correct);
  r.Number("geomean_failed_1", m.geomean_failed_1);
  r.Number("geomean_failed_0", m.geomean_failed_0);
  r.Integer("tasks", m.tasks);
  r.Integer("correct", m.correct);
  r.Integer("steps", m.steps);
  r.Number("seconds", m.seconds);
  r.Integer("chat_calls", m.chat_calls);
  r.Integer("prompt_tokens", m.prompt_tokens);
  r.Integer("completion_tokens", m.completion_tokens);
  r.Number("cost", m.cost);
  return r.ok();
}

bool OutcomeFromJson(const json& j, const std::string& path, TaskOutcome& o, std::string& error) {
  if (!j.is_object()) {
    error = path + ": must be an object";
    return false;
  }
  FieldReader r(j, path, error);
  r.String("task", o.task);
  r.Integer("episode", o.episode);
  r.Bool("correct", o.correct);
  r.Number("speedup", o.speedup);
  r.Number("best_speedup", o.best_speedup);
  r.Number("starter_speedup", o.starter_speedup);
  r.String("status", o.status);
  r.Integer("steps", o.steps);
  r.Number("seconds", o.seconds);
  r.Integer("chat_calls", o.chat_calls);
  r.Integer("prompt_tokens", o.prompt_tokens);
  r.Integer("completion_tokens", o.completion_tokens);
  if (j.contains("speedup_kind")) r.String("speedup_kind", o.speedup_kind);
  return r.ok();
}

// ---- Markdown ---------------------------------------------------------------------------------

// Table cells must not break the table: a '|' is escaped and a newline becomes a space.
std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// Appends " text |": one more cell of a row that has its leading "| label |" already.
void AddCell(std::string& out, const std::string& text) {
  out += ' ';
  out += text;
  out += " |";
}

std::string Percent(double fraction) { return Format("%.1f%%", fraction * 100); }
std::string Times(double speedup) { return Format("%.2fx", speedup); }
std::string SpeedupOrDash(double speedup) { return speedup > 0 && std::isfinite(speedup) ? Times(speedup) : "—"; }

// A task's row label; the episode is named only when the report ran some task more than once, so
// that the common single-episode report reads plainly and comparisons still align episode by episode.
bool HasEpisodes(const Report& report) {
  return std::any_of(report.outcomes.begin(), report.outcomes.end(), [](const TaskOutcome& o) { return o.episode != 0; });
}
std::string RowLabel(const TaskOutcome& o, bool episodes) {
  return episodes ? o.task + " (episode " + std::to_string(o.episode) + ")" : o.task;
}

// The metric rows shared by the single and the comparison tables: a name and a value renderer.
struct MetricRow {
  std::string name;
  std::function<std::string(const Metrics&)> render;
};
std::vector<MetricRow> MetricRows() {
  std::vector<MetricRow> rows = {
      {"tasks", [](const Metrics& m) { return std::to_string(m.tasks); }},
      {"correct", [](const Metrics& m) { return std::to_string(m.correct); }},
  };
  for (double p : kFastP) {
    rows.push_back({FastPKey(p), [key = FastPKey(p)](const Metrics& m) {
                      const auto it = m.fast_p.find(key);
                      return it == m.fast_p.end() ? std::string("—") : Percent(it->second);
                    }});
  }
  rows.insert(rows.end(), {
      {"geomean_correct", [](const Metrics& m) { return Times(m.geomean_correct); }},
      {"geomean_failed_1", [](const Metrics& m) { return Times(m.geomean_failed_1); }},
      {"geomean_failed_0", [](const Metrics& m) { return Times(m.geomean_failed_0); }},
      {"steps", [](const Metrics& m) { return std::to_string(m.steps); }},
      {"seconds", [](const Metrics& m) { return Format("%.1f", m.seconds); }},
      {"chat calls", [](const Metrics& m) { return std::to_string(m.chat_calls); }},
      {"prompt tokens", [](const Metrics& m) { return std::to_string(m.prompt_tokens); }},
      {"completion tokens", [](const Metrics& m) { return std::to_string(m.completion_tokens); }},
      {"cost", [](const Metrics& m) { return Format("%.4f", m.cost); }},
  });
  return rows;
}

// ---- SVG --------------------------------------------------------------------------------------

std::string Xml(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

// Distinct on white and for the common color-vision deficiencies (Tableau 10); cycles past ten.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr double kWidth = 720, kHeight = 420;
constexpr double kPlotLeft = 70, kPlotRight = 520, kPlotTop = 40, kPlotBottom = 360;
// Failed tasks (and correct ones slower than this) sit on the floor, visibly below every tick
// that a working kernel plausibly reaches.
constexpr double kFloor = 0.05;

std::string TickLabel(double value) { return Format("%gx", value); }

}  // namespace

std::string FastPKey(double p) { return p == 0 ? "fast_0" : Format("fast_%.1f", p); }

Metrics ComputeMetrics(const std::vector<TaskOutcome>& outcomes, const Prices& prices) {
  Metrics m;
  m.tasks = static_cast<int>(outcomes.size());
  std::vector<double> correct_speedups, failed_as_one;
  bool any_failed = false;
  for (const TaskOutcome& o : outcomes) {
    if (o.correct) ++m.correct;
    if (Timed(o)) {
      correct_speedups.push_back(o.speedup);
      failed_as_one.push_back(o.speedup);
    } else {
      failed_as_one.push_back(1);
      any_failed = true;
    }
    m.steps += o.steps;
    m.seconds += o.seconds;
    m.chat_calls += o.chat_calls;
    m.prompt_tokens += o.prompt_tokens;
    m.completion_tokens += o.completion_tokens;
  }
  for (double p : kFastP) {
    const auto count = std::count_if(outcomes.begin(), outcomes.end(),
                                     [p](const TaskOutcome& o) { return Timed(o) && o.speedup > p; });
    m.fast_p[FastPKey(p)] = outcomes.empty() ? 0 : static_cast<double>(count) / static_cast<double>(outcomes.size());
  }
  m.geomean_correct = GeometricMean(correct_speedups);
  m.geomean_failed_1 = GeometricMean(failed_as_one);
  m.geomean_failed_0 = any_failed ? 0 : GeometricMean(correct_speedups);
  m.cost = (static_cast<double>(m.prompt_tokens) * prices.prompt_per_million +
            static_cast<double>(m.completion_tokens) * prices.completion_per_million) /
           1e6;
  return m;
}

nlohmann::json ReportToJson(const Report& report) {
  json outcomes = json::array();
  for (const TaskOutcome& o : report.outcomes) outcomes.push_back(OutcomeToJson(o));
  return {{"policy", report.policy},         {"suite", report.suite},
          {"backend", report.backend},       {"created", report.created},
          {"provenance", report.provenance}, {"metrics", MetricsToJson(report.metrics)},
          {"outcomes", std::move(outcomes)}};
}

std::optional<Report> ReportFromJson(const nlohmann::json& j, std::string& error) {
  if (!j.is_object()) {
    error = "report: must be an object";
    return std::nullopt;
  }
  Report report;
  FieldReader r(j, "", error);
  r.String("policy", report.policy);
  r.String("suite", report.suite);
  r.String("backend", report.backend);
  r.String("created", report.created);
  if (const json* provenance = r.Object("provenance")) report.provenance = *provenance;
  const json* metrics = r.Object("metrics");
  const json* outcomes = r.Array("outcomes");
  if (!r.ok() || !MetricsFromJson(*metrics, report.metrics, error)) return std::nullopt;
  for (size_t i = 0; i < outcomes->size(); ++i) {
    TaskOutcome o;
    if (!OutcomeFromJson((*outcomes)[i], "outcomes[" + std::to_string(i) + "]", o, error)) return std::nullopt;
    report.outcomes.push_back(std::move(o));
  }
  return report;
}

std::string RenderMarkdown(const Report& report) {
  std::string out = "# " + report.policy + " on " + report.suite + " (" + report.backend + ")\n\n";
  if (!report.created.empty()) out += "Created " + report.created + ".\n\n";
  out += "| metric | value |\n|---|---|\n";
  for (const MetricRow& row : MetricRows()) out += "| " + row.name + " | " + row.render(report.metrics) + " |\n";
  if (std::any_of(report.outcomes.begin(), report.outcomes.end(),
                  [](const TaskOutcome& o) { return o.speedup_kind == "estimated"; }))
    out += "\nSpeedups marked *est.* are the TPU compiler's static estimates (a pallas evaluation off a TPU, "
           "docs/results.md `estimate`), not measurements; fast_p and the geomeans count them as they were paid.\n";
  out += "\n## Tasks\n\n| task | correct | speedup | best | starter | steps | seconds | tokens |\n";
  out += "|---|---|---|---|---|---|---|---|\n";
  const bool episodes = HasEpisodes(report);
  for (const TaskOutcome& o : report.outcomes) {
    out += "| " + Cell(RowLabel(o, episodes)) + " | " + (o.correct ? "✓" : "✗") + " | " +
           (Timed(o) ? Times(o.speedup) + (o.speedup_kind == "estimated" ? " *est.*" : "") : "—") + " | " +
           SpeedupOrDash(o.best_speedup) + " | " +
           SpeedupOrDash(o.starter_speedup) + " | " + std::to_string(o.steps) + " | " + Format("%.1f", o.seconds) +
           " | " + std::to_string(o.prompt_tokens + o.completion_tokens) + " |\n";
  }
  return out;
}

std::string RenderComparisonMarkdown(const std::vector<Report>& reports) {
  std::string out = "# Comparison\n\n| metric |";
  std::string rule = "|---|";
  for (const Report& r : reports) {
    AddCell(out, Cell(r.policy));
    rule += "---|";
  }
  out += "\n" + rule + "\n";
  auto text_row = [&](const std::string& name, std::string Report::*field) {
    out += "| " + name + " |";
    for (const Report& r : reports) AddCell(out, Cell(r.*field));
    out += "\n";
  };
  text_row("suite", &Report::suite);
  text_row("backend", &Report::backend);
  for (const MetricRow& row : MetricRows()) {
    out += "| " + row.name + " |";
    for (const Report& r : reports) AddCell(out, row.render(r.metrics));
    out += "\n";
  }

  // Rows in first-seen order over the reports; a cell holds the final speedup, "✗" for a failed
  // outcome and "—" where the report lacks the task.
  std::vector<std::string> rows;
  std::set<std::string> seen;
  std::vector<std::map<std::string, const TaskOutcome*>> by_row(reports.size());
  for (size_t i = 0; i < reports.size(); ++i) {
    const bool episodes = HasEpisodes(reports[i]);
    for (const TaskOutcome& o : reports[i].outcomes) {
      const std::string label = RowLabel(o, episodes);
      by_row[i].emplace(label, &o);
      if (seen.insert(label).second) rows.push_back(label);
    }
  }
  out += "\n## Speedup per task\n\n| task |";
  for (const Report& r : reports) AddCell(out, Cell(r.policy));
  out += "\n" + rule + "\n";
  for (const std::string& label : rows) {
    double best = 0;
    for (const auto& outcomes : by_row) {
      const auto it = outcomes.find(label);
      if (it != outcomes.end() && Timed(*it->second)) best = std::max(best, it->second->speedup);
    }
    out += "| " + Cell(label) + " |";
    for (const auto& outcomes : by_row) {
      const auto it = outcomes.find(label);
      if (it == outcomes.end()) {
        AddCell(out, "—");
      } else if (!Timed(*it->second)) {
        AddCell(out, "✗");
      } else {
        const std::string cell = Times(it->second->speedup);
        AddCell(out, it->second->speedup == best ? "**" + cell + "**" : cell);
      }
    }
    out += "\n";
  }
  return out;
}

std::string RenderSpeedupSvg(const std::vector<Report>& reports) {
  // Each report's final speedups, failed ones at the floor, in decreasing order.
  std::vector<std::vector<double>> series;
  double max_speedup = 0;
  size_t max_tasks = 1;
  for (const Report& r : reports) {
    std::vector<double> s;
    for (const TaskOutcome& o : r.outcomes) s.push_back(Timed(o) ? std::max(o.speedup, kFloor) : kFloor);
    std::sort(s.rbegin(), s.rend());
    if (!s.empty()) max_speedup = std::max(max_speedup, s.front());
    max_tasks = std::max(max_tasks, s.size());
    series.push_back(std::move(s));
  }
  // The top is a power of two at or above the fastest task, at least 2x so 1x is never the edge.
  double top = 2;
  while (top < max_speedup) top *= 2;
  const double log_floor = std::log10(kFloor), log_span = std::log10(top) - log_floor;
  auto y = [&](double v) { return kPlotBottom - (std::log10(v) - log_floor) / log_span * (kPlotBottom - kPlotTop); };
  auto x = [&](double rank) { return kPlotLeft + rank / static_cast<double>(max_tasks) * (kPlotRight - kPlotLeft); };

  std::string out = Format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n",
      kWidth, kHeight, kWidth, kHeight);
  out += Format("<rect width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n", kWidth, kHeight);
  out += Format("<text x=\"%.1f\" y=\"22\" text-anchor=\"middle\" font-size=\"14\">Final speedup per task</text>\n",
                (kPlotLeft + kPlotRight) / 2);

  // Y ticks: the floor, the fractions, then powers of two (every other one when there are many).
  std::vector<double> ticks = {kFloor, 0.1, 0.25, 0.5, 1};
  const double factor = top > 256 ? 4 : 2;
  for (double t = factor; t <= top; t *= factor) ticks.push_back(t);
  if (ticks.back() != top) ticks.push_back(top);
  for (double t : ticks) {
    out += Format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n", kPlotLeft, y(t),
                  kPlotRight, y(t));
    // dominant-baseline="middle" puts the label's y exactly at its tick's.
    out += Format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" dominant-baseline=\"middle\">%s</text>\n",
                  kPlotLeft - 6, y(t), TickLabel(t).c_str());
  }
  // X ticks at "nice" ranks, each label centred under its task's step.
  size_t step = 1;
  for (size_t nice : {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000}) {
    step = nice;
    if (max_tasks / nice <= 10) break;
  }
  for (size_t rank = 1; rank <= max_tasks; rank += (rank == 1 && step > 1 ? step - 1 : step)) {
    out += Format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%zu</text>\n",
                  x(static_cast<double>(rank) - 0.5), kPlotBottom + 16, rank);
  }
  out += Format("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"black\"/>\n",
                kPlotLeft, kPlotTop, kPlotRight - kPlotLeft, kPlotBottom - kPlotTop);
  out += Format("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">task rank (sorted by final speedup)</text>\n",
                (kPlotLeft + kPlotRight) / 2, kPlotBottom + 40);
  out += Format(
      "<text x=\"18\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.1f)\">"
      "speedup over reference (log scale; failed at %s)</text>\n",
      (kPlotTop + kPlotBottom) / 2, (kPlotTop + kPlotBottom) / 2, TickLabel(kFloor).c_str());
  out += Format(
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\" stroke-dasharray=\"6 4\"/>\n"
      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">reference</text>\n",
      kPlotLeft, y(1), kPlotRight, y(1), kPlotRight - 4, y(1) - 4);

  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kPalette[i % std::size(kPalette)];
    std::string points;
    for (size_t k = 0; k < series[i].size(); ++k) {
      const double level = y(series[i][k]);
      points += Format("%s%.1f,%.1f %.1f,%.1f", points.empty() ? "" : " ", x(static_cast<double>(k)), level,
                       x(static_cast<double>(k + 1)), level);
    }
    out += "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"2\" points=\"" + points +
           "\"/>\n";
    const double legend_y = kPlotTop + 8 + 18 * static_cast<double>(i);
    out += Format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>\n",
                  kPlotRight + 14, legend_y, kPlotRight + 34, legend_y, color);
    out += Format("<text x=\"%.1f\" y=\"%.1f\" dominant-baseline=\"middle\">", kPlotRight + 40, legend_y) +
           Xml(reports[i].policy) + " (" + Times(reports[i].metrics.geomean_failed_1) + ")</text>\n";
  }
  if (!reports.empty()) {
    out += Format("<text x=\"%.1f\" y=\"%.1f\" fill=\"#555555\">(geomean, failed = 1x)</text>\n", kPlotRight + 14,
                  kPlotTop + 8 + 18 * static_cast<double>(reports.size()) + 4);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace kernelgym::evaluate
