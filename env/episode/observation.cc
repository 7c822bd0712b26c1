#include "env/episode/observation.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <set>
#include <sstream>
#include <string_view>

#include "core/result_json.h"
#include "core/text_safety.h"

namespace kernelgym {
namespace {

constexpr std::string_view kInvalidAction = "invalid_action";
constexpr std::size_t kMaxDiagnostics = 10;
constexpr std::size_t kMaxDetails = 4;
constexpr std::size_t kMaxFailingOutputs = 4;
constexpr std::size_t kMaxMissedLoops = 6;
constexpr std::size_t kMaxLineChars = 160;
// A diagnostic's message is shown whole (the part a model needs — a Mosaic block-shape error's
// shapes, a template's instantiation — is often past the first 160 bytes or on a later line),
// wrapped at kWrapColumn; only a flood past kMaxMessageBytes is cut, and says so.
constexpr std::size_t kWrapColumn = 120;
constexpr std::size_t kMaxMessageBytes = 2000;

// Every value of an enum that StageName / StatusName know, in declaration order. The enums are
// contiguous from 0 and their name tables say "?" past the end, so a new status or stage joins
// the one-hot features (and FeatureNames) without an edit here.
template <typename Enum, typename NameOf>
std::vector<Enum> AllOf(NameOf name_of) {
  std::vector<Enum> all;
  for (int i = 0; name_of(static_cast<Enum>(i)) != "?"; ++i) all.push_back(static_cast<Enum>(i));
  return all;
}

std::string Fmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  return buf;
}

// A number with fixed precision, or "n/a": the text must not depend on how a platform spells
// NaN and infinity.
std::string Num(const char* fmt, double v) { return std::isfinite(v) ? Fmt(fmt, v) : "n/a"; }

// Absolute paths (a work folder with a random name, a toolchain's header) would make the text
// differ between runs and machines and say nothing a policy can act on: keep the last component.
std::string ScrubPaths(std::string_view text) {
  auto starts_token = [](char c) { return std::string_view(" \t'\"(=:[<,`").find(c) != std::string_view::npos; };
  auto ends_token = [](char c) {
    return std::isspace(static_cast<unsigned char>(c)) ||
           std::string_view("'\"),:;]>`").find(c) != std::string_view::npos;
  };
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '/' && (i == 0 || starts_token(text[i - 1]))) {
      std::size_t end = i;
      while (end < text.size() && !ends_token(text[end])) ++end;
      const std::string_view token = text.substr(i, end - i);
      if (token.find('/', 1) != std::string_view::npos && token.back() != '/') {
        out += token.substr(token.rfind('/') + 1);
        i = end;
        continue;
      }
    }
    out += text[i++];
  }
  return out;
}

// At most kMaxLineChars bytes of `line`, cut between characters (a cut inside a multi-byte
// sequence would make the text invalid UTF-8, which the Python client refuses).
std::string Clip(std::string line) {
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  if (line.size() > kMaxLineChars) line = std::string(Utf8Prefix(line, kMaxLineChars - 3)) + "...";
  return line;
}

// One line of at most kMaxLineChars, paths scrubbed. Most of what is quoted here is the
// candidate's (diagnostics about its source, its process's output): control characters are
// shown as escapes (PrintableText), so none of it can rewrite the lines around it on a terminal
// (hitl prints this text) or start a line a model could read as the environment's own.
std::string OneLine(std::string_view text) { return Clip(PrintableText(ScrubPaths(text.substr(0, text.find('\n'))))); }

// Whether a diagnostic is about the candidate's own source, whose lines the text quotes: the file
// each backend compiles it as (cpu kernel.cpp, pallas candidate.py), or none named.
bool InKernel(const Diagnostic& d) {
  return d.file.empty() || d.file == "kernel.cpp" || d.file == "kernel.cu" || d.file == "kernel.py" ||
         d.file == "candidate.py";
}

// `text` whole, every line made printable and paths scrubbed (as OneLine), wrapped at kWrapColumn
// (at a space when there is one), continuation lines starting with `indent`.
std::string Wrapped(std::string_view text, const std::string& indent) {
  std::string kept(text.substr(0, kMaxMessageBytes));
  const std::size_t cut = text.size() - Utf8Prefix(kept, kMaxMessageBytes).size();
  kept = std::string(Utf8Prefix(kept, kMaxMessageBytes));
  std::vector<std::string> lines;
  std::istringstream in(kept);
  for (std::string raw; std::getline(in, raw);) {
    std::string line = PrintableText(ScrubPaths(raw));
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    while (line.size() > kWrapColumn) {
      std::string_view head = Utf8Prefix(line, kWrapColumn);
      const std::size_t space = head.rfind(' ');
      if (space != std::string_view::npos && space > kWrapColumn / 2) head = head.substr(0, space + 1);
      lines.emplace_back(head);
      line.erase(0, head.size());
    }
    if (!line.empty()) lines.push_back(line);
  }
  if (cut > 0) lines.push_back("... (" + std::to_string(cut) + " more bytes)");
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) out += (i == 0 ? "" : "\n" + indent) + lines[i];
  return out;
}

int SeverityRank(const Diagnostic& d) { return d.severity == "error" ? 0 : d.severity == "warning" ? 1 : 2; }

int64_t CountSeverity(const EvalResult& r, std::string_view severity) {
  return std::count_if(r.diagnostics.begin(), r.diagnostics.end(),
                       [&](const Diagnostic& d) { return d.severity == severity; });
}

std::string Plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Loops, by source line: a line with any "vectorized" remark counts as vectorized (g++ reports a
// loop once per vector size it tries); the others, with their first reason, as not vectorized.
struct Loops {
  std::set<int> vectorized;
  std::vector<const Remark*> missed;  // one per line, in line order
};

Loops ClassifyLoops(const EvalResult& r) {
  Loops loops;
  if (!r.profile) return loops;
  for (const Remark& m : r.profile->remarks)
    if (m.vectorized) loops.vectorized.insert(m.line);
  std::set<int> seen;
  std::vector<const Remark*> missed;
  for (const Remark& m : r.profile->remarks)
    if (!m.vectorized && !loops.vectorized.count(m.line) && seen.insert(m.line).second) missed.push_back(&m);
  std::stable_sort(missed.begin(), missed.end(), [](const Remark* a, const Remark* b) { return a->line < b->line; });
  loops.missed = std::move(missed);
  return loops;
}

struct Totals {
  int64_t elements = 0, mismatches = 0, non_finite = 0;
};

Totals CorrectnessTotals(const EvalResult& r) {
  Totals t;
  if (!r.correctness) return t;
  for (const OutputCheck& c : r.correctness->checks) {
    t.elements += std::max<int64_t>(c.elements, 0);
    t.mismatches += std::max<int64_t>(c.mismatches, 0);
    t.non_finite += std::max<int64_t>(c.non_finite, 0);
  }
  return t;
}

std::string IndexText(const OutputCheck& c) {
  if (c.first_mismatch_index.empty()) return "flat index " + std::to_string(c.first_mismatch);
  std::string out = "[";
  for (std::size_t i = 0; i < c.first_mismatch_index.size(); ++i)
    out += (i ? ", " : "") + std::to_string(c.first_mismatch_index[i]);
  return out + "]";
}

// ---- the Markdown rendering ----

void RenderDiagnostics(std::ostringstream& out, const EvalResult& r, const std::string& source) {
  std::vector<const Diagnostic*> shown;
  for (const Diagnostic& d : r.diagnostics)
    if (!(d.severity == "note" && r.status == Status::kOk)) shown.push_back(&d);
  if (shown.empty()) return;
  std::stable_sort(shown.begin(), shown.end(),
                   [](const Diagnostic* a, const Diagnostic* b) { return SeverityRank(*a) < SeverityRank(*b); });
  out << "diagnostics: " << Plural(CountSeverity(r, "error"), "error", "errors") << ", "
      << Plural(CountSeverity(r, "warning"), "warning", "warnings") << "\n";
  for (std::size_t i = 0; i < shown.size() && i < kMaxDiagnostics; ++i) {
    const Diagnostic& d = *shown[i];
    out << "- " << d.severity << " at ";
    if (!InKernel(d)) out << OneLine(d.file.substr(d.file.rfind('/') + 1)) << ":";
    out << d.line << ":" << d.column << ": " << Wrapped(d.message, "    ") << "\n";
    if (InKernel(d) && d.line > 0) {
      out << "      " << d.line << " | " << Clip(PrintableText(SourceLine(source, d.line))) << "\n";
    }
  }
  if (shown.size() > kMaxDiagnostics) out << "- ... " << shown.size() - kMaxDiagnostics << " more\n";
}

void RenderCorrectness(std::ostringstream& out, const CorrectnessReport& c) {
  if (c.trials_run <= 0) return;
  std::vector<const OutputCheck*> failing;
  for (const OutputCheck& check : c.checks)
    if (!check.passed() || check.non_finite > 0) failing.push_back(&check);
  out << "correctness: " << Plural(c.trials_run, "trial", "trials") << ", "
      << (c.deterministic ? "deterministic" : "NOT deterministic (a second run gave different outputs)") << ", "
      << (failing.empty()
              ? "all outputs match"
              : std::to_string(failing.size()) + " of " + std::to_string(c.checks.size()) + " outputs wrong")
      << "\n";
  for (std::size_t i = 0; i < failing.size() && i < kMaxFailingOutputs; ++i) {
    const OutputCheck& k = *failing[i];
    const double percent =
        k.elements > 0 ? 100.0 * static_cast<double>(k.mismatches) / static_cast<double>(k.elements) : 0;
    out << "- " << OneLine(k.output) << ": " << k.mismatches << " of " << k.elements << " elements wrong ("
        << Num("%.3f", percent) << "%), " << k.non_finite << " non-finite (NaN/Inf or poison left)"
        << "; max abs err " << Num("%.3g", k.max_abs_error) << ", max rel err " << Num("%.3g", k.max_rel_error);
    if (k.first_mismatch >= 0 || !k.first_mismatch_index.empty())
      out << "; first at " << IndexText(k) << ": expected " << Num("%.6g", k.expected) << ", got "
          << Num("%.6g", k.actual);
    out << "\n";
  }
  if (failing.size() > kMaxFailingOutputs) out << "- ... " << failing.size() - kMaxFailingOutputs << " more outputs\n";
}

void RenderTiming(std::ostringstream& out, const TimingReport& t) {
  if (t.rounds <= 0) return;
  out << "timing: speedup " << Num("%.3f", t.speedup) << "x (95% CI " << Num("%.3f", t.speedup_ci_low) << "-"
      << Num("%.3f", t.speedup_ci_high) << "), median candidate " << Num("%.1f", t.candidate.median_ns / 1e3)
      << " us vs reference " << Num("%.1f", t.reference.median_ns / 1e3) << " us, "
      << Plural(t.rounds, "round", "rounds") << (t.converged ? "" : " (interval not converged)") << "\n";
}

void RenderProfile(std::ostringstream& out, const ProfileReport& p, const Loops& loops) {
  if (p.peak_gflops > 0 || p.peak_gbps > 0) {
    out << "roofline: " << (p.bound.empty() ? std::string("?") : OneLine(p.bound)) << "-bound, "
        << Num("%.1f", p.fraction_of_peak * 100) << "% of that roof; " << Num("%.1f", p.achieved_gflops)
        << " GFLOP/s (peak " << Num("%.1f", p.peak_gflops) << "), " << Num("%.1f", p.achieved_gbps) << " GB/s (peak "
        << Num("%.1f", p.peak_gbps) << "), intensity " << Num("%.2f", p.arithmetic_intensity) << " flop/B\n";
  }
  if (loops.vectorized.empty() && loops.missed.empty()) return;
  out << "vectorization: ";
  if (loops.vectorized.empty()) {
    out << "no loop vectorized";
  } else {
    out << "vectorized loops at line" << (loops.vectorized.size() == 1 ? " " : "s ");
    bool first = true;
    for (int line : loops.vectorized) {
      out << (first ? "" : ", ") << line;
      first = false;
    }
  }
  out << (loops.missed.empty() ? "\n" : "; not vectorized:\n");
  for (std::size_t i = 0; i < loops.missed.size() && i < kMaxMissedLoops; ++i)
    out << "- line " << loops.missed[i]->line << ": " << OneLine(loops.missed[i]->message) << "\n";
  if (loops.missed.size() > kMaxMissedLoops) out << "- ... " << loops.missed.size() - kMaxMissedLoops << " more\n";
}

std::string RenderText(const EvalResult& r, const ObservationContext& context, const Loops& loops) {
  std::ostringstream out;
  out << "## " << context.task.id << " | step " << context.step << " | " << context.steps_left << "/"
      << context.max_steps << " steps left | " << Num("%.1f", context.seconds_left) << "/"
      << Num("%.1f", context.time_budget_s) << " s left\n";
  if (!context.action_error.empty())
    out << "invalid action (not applied; the source is unchanged): " << OneLine(context.action_error) << "\n";
  if (context.reused) out << "(unchanged source: previous evaluation re-used)\n";
  out << (context.action_error.empty() ? "status: " : "status of the current source: ") << StatusName(r.status)
      << " (stage " << StageName(r.stage) << "): " << OneLine(r.message) << "\n";
  RenderDiagnostics(out, r, context.source);
  if (r.status != Status::kOk && r.diagnostics.empty())
    for (std::size_t i = 0; i < r.details.size() && i < kMaxDetails; ++i) out << "> " << OneLine(r.details[i]) << "\n";
  if (r.correctness) RenderCorrectness(out, *r.correctness);
  if (r.timing && r.timing_representative) RenderTiming(out, *r.timing);
  if (r.status == Status::kOk && !r.timing_representative && RewardableSpeedupOf(r).kind != SpeedupKind::kEstimated)
    out << "timing: not representative (no reward for speed): " << OneLine(r.timing_note) << "\n";
  for (const std::string& line : RenderStaticEstimate(r)) out << line << "\n";
  if (!r.estimates.empty()) {
    out << "estimates (not measurements):";
    for (const auto& [name, value] : r.estimates) out << " " << name << "=" << Num("%.4g", value);
    out << "\n";
  }
  if (r.profile) RenderProfile(out, *r.profile, loops);
  out << "best speedup so far: "
      << (context.best_speedup > 0 && std::isfinite(context.best_speedup) ? Num("%.3f", context.best_speedup) + "x"
                                                                          : std::string("none yet"))
      << "\n";
  if (context.best_estimated_speedup > 0 && std::isfinite(context.best_estimated_speedup))
    out << "best estimated speedup so far: " << Num("%.3f", context.best_estimated_speedup) << "x (TPU compiler's estimate)\n";
  return out.str();
}

// ---- the feature vector ----

// Appends named features; with `values` null it only collects names (FeatureNames), so the names
// and the values come from the same code and cannot drift apart.
class FeatureSink {
 public:
  FeatureSink(std::vector<std::string>* names, std::vector<double>* values) : names_(names), values_(values) {}
  // Non-finite values become 0 and everything is clamped to [lo, hi]: a learned policy must never
  // see NaN or Inf, whatever the runner reported.
  void Add(std::string_view name, double value, double lo, double hi) {
    if (names_) names_->emplace_back(name);
    if (!values_) return;
    if (!std::isfinite(value)) value = 0;
    values_->push_back(std::clamp(value, lo, hi));
  }
  void Flag(std::string_view name, bool on) { Add(name, on ? 1 : 0, 0, 1); }
  // A one-hot entry named prefix + name; the name is only built when names are collected (every
  // observation computes the values, and allocating their names each time showed in profiles).
  void Flag(std::string_view prefix, std::string_view name, bool on) {
    if (names_) names_->push_back(std::string(prefix) + std::string(name));
    if (values_) values_->push_back(on ? 1 : 0);
  }

 private:
  std::vector<std::string>* names_;
  std::vector<double>* values_;
};

double LogOrZero(double x) { return x > 0 && std::isfinite(x) ? std::log(x) : 0; }
double Ratio(double a, double b) { return b > 0 ? a / b : 0; }

void AddFeatures(FeatureSink& f, const EvalResult& r, const ObservationContext& context, std::string_view status) {
  constexpr double kLogMax = 20;  // e^20: no speedup, flop or byte count gets near it
  static const std::vector<Status> kStatuses = AllOf<Status>(StatusName);
  static const std::vector<Stage> kStages = AllOf<Stage>(StageName);
  for (Status s : kStatuses) f.Flag("status_", StatusName(s), status == StatusName(s));
  f.Flag("status_", kInvalidAction, status == kInvalidAction);
  for (Stage s : kStages) f.Flag("stage_", StageName(s), r.stage == s);

  const bool timed = status == "ok" && r.timing && r.timing_representative && r.timing->speedup > 0;
  const double log_speedup = timed ? LogOrZero(r.timing->speedup) : 0;
  // A bound that is missing (a run too short for an interval) reads as the point estimate.
  auto log_bound = [&](double bound) { return timed && bound > 0 ? LogOrZero(bound) : log_speedup; };
  f.Add("log_speedup", log_speedup, -kLogMax, kLogMax);
  f.Add("log_speedup_ci_low", timed ? log_bound(r.timing->speedup_ci_low) : 0, -kLogMax, kLogMax);
  f.Add("log_speedup_ci_high", timed ? log_bound(r.timing->speedup_ci_high) : 0, -kLogMax, kLogMax);
  f.Add("log_best_speedup", LogOrZero(context.best_speedup), -kLogMax, kLogMax);
  f.Flag("reused", context.reused);
  f.Flag("action_error", !context.action_error.empty());

  f.Add("log1p_compile_errors", std::log1p(static_cast<double>(CountSeverity(r, "error"))), 0, kLogMax);
  f.Add("log1p_compile_warnings", std::log1p(static_cast<double>(CountSeverity(r, "warning"))), 0, kLogMax);

  const Totals totals = CorrectnessTotals(r);
  f.Add("mismatch_fraction", Ratio(static_cast<double>(totals.mismatches), static_cast<double>(totals.elements)), 0, 1);
  f.Add("non_finite_fraction", Ratio(static_cast<double>(totals.non_finite), static_cast<double>(totals.elements)), 0,
        1);
  f.Flag("nondeterministic", r.correctness && !r.correctness->deterministic);

  // Above 1 only when the measured peak is below what a kernel reached; 2 keeps that visible.
  f.Add("fraction_of_peak", r.profile ? r.profile->fraction_of_peak : 0, 0, 2);
  f.Flag("memory_bound", r.profile && r.profile->bound == "memory");
  // The task's own numbers, so a policy shared across tasks can tell them apart.
  f.Add("log10_arithmetic_intensity", std::log10(std::max(Ratio(context.task.flops, context.task.bytes), 1e-6)), -6, 6);
  f.Add("log10_task_flops", std::log10(std::max(context.task.flops, 1.0)), 0, kLogMax);
  f.Add("log10_task_bytes", std::log10(std::max(context.task.bytes, 1.0)), 0, kLogMax);

  const Loops loops = ClassifyLoops(r);
  f.Add("log1p_vectorized_loops", std::log1p(static_cast<double>(loops.vectorized.size())), 0, kLogMax);
  f.Add("log1p_not_vectorized_loops", std::log1p(static_cast<double>(loops.missed.size())), 0, kLogMax);

  f.Add("steps_left_fraction", Ratio(static_cast<double>(context.steps_left), static_cast<double>(context.max_steps)),
        0, 1);
  f.Add("seconds_left_fraction", Ratio(context.seconds_left, context.time_budget_s), 0, 1);
  f.Add("log1p_eval_seconds", std::log1p(std::max(r.seconds, 0.0)), 0, kLogMax);
}

double FiniteOrZero(double x) { return std::isfinite(x) ? x : 0; }

}  // namespace

protocol::Observation BuildObservation(const EvalResult& result, const ObservationContext& context) {
  protocol::Observation obs;
  const bool invalid = !context.action_error.empty();
  obs.step = context.step;
  obs.status = invalid ? std::string(kInvalidAction) : std::string(StatusName(result.status));
  obs.stage = std::string(StageName(result.stage));
  obs.message = invalid ? context.action_error : result.message;
  obs.action_error = context.action_error;
  obs.reused = context.reused;
  if (!invalid && result.status == Status::kOk && result.timing && result.timing_representative) {
    obs.speedup = FiniteOrZero(result.timing->speedup);
    obs.speedup_ci_low = FiniteOrZero(result.timing->speedup_ci_low);
    obs.speedup_ci_high = FiniteOrZero(result.timing->speedup_ci_high);
  }
  obs.best_speedup = FiniteOrZero(context.best_speedup);
  obs.steps_left = context.steps_left;
  obs.seconds_left = FiniteOrZero(context.seconds_left);
  obs.source = context.source;
  obs.report = context.report ? *context.report : ResultToJson(result, /*include_samples=*/false);
  obs.text = RenderText(result, context, ClassifyLoops(result));
  obs.features.reserve(FeatureNames().size());
  FeatureSink sink(nullptr, &obs.features);
  AddFeatures(sink, result, context, obs.status);
  return obs;
}

const std::vector<std::string>& FeatureNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    static const Task task;
    static const std::string source;
    FeatureSink sink(&out, nullptr);
    AddFeatures(sink, EvalResult{}, ObservationContext{.task = task, .source = source, .action_error = {}}, "ok");
    return out;
  }();
  return names;
}

}  // namespace kernelgym
