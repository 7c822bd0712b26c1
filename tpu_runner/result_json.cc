#include "tpu_runner/result_json.h"

#include <cstdio>
#include <sstream>

namespace kernelgym {

using nlohmann::json;

namespace {

json StatsJson(const TimeStats& s) {
  return {{"median_ns", s.median_ns}, {"p10_ns", s.p10_ns}, {"p90_ns", s.p90_ns}, {"min_ns", s.min_ns}, {"cv", s.cv}};
}

std::string Fmt(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), fmt, a, b, c, d);
  return buf;
}

std::string SourceLine(const std::string& source, int line) {
  std::istringstream in(source);
  std::string text;
  for (int i = 1; std::getline(in, text); ++i)
    if (i == line) return text;
  return {};
}

}  // namespace

json ResultToJson(const EvalResult& r, bool include_samples) {
  json j{{"task", r.task_id},
         {"backend", r.backend},
         {"status", std::string(StatusName(r.status))},
         {"stage", std::string(StageName(r.stage))},
         {"message", r.message},
         {"details", r.details},
         {"compile_cached", r.compile_cached},
         {"protections", r.protections},
         {"stage_seconds", r.stage_seconds},
         {"seconds", r.seconds}};
  json diags = json::array();
  for (const Diagnostic& d : r.diagnostics)
    diags.push_back({{"file", d.file}, {"line", d.line}, {"column", d.column}, {"severity", d.severity}, {"message", d.message}});
  j["diagnostics"] = diags;
  if (r.correctness) {
    json checks = json::array();
    for (const OutputCheck& c : r.correctness->checks)
      checks.push_back({{"output", c.output}, {"elements", c.elements}, {"mismatches", c.mismatches},
                        {"non_finite", c.non_finite}, {"max_abs_error", c.max_abs_error},
                        {"max_rel_error", c.max_rel_error}, {"first_mismatch", c.first_mismatch_index},
                        {"expected", c.expected}, {"actual", c.actual}});
    j["correctness"] = {{"trials", r.correctness->trials_run}, {"seeds", r.correctness->seeds},
                        {"deterministic", r.correctness->deterministic}, {"checks", checks}};
  }
  if (r.timing) {
    const TimingReport& t = *r.timing;
    j["speedup"] = t.speedup;
    j["timing"] = {{"reference", StatsJson(t.reference)},
                   {"candidate", StatsJson(t.candidate)},
                   {"speedup", t.speedup},
                   {"speedup_ci95", {t.speedup_ci_low, t.speedup_ci_high}},
                   {"converged", t.converged},
                   {"rounds", t.rounds},
                   {"discarded", t.discarded},
                   {"seconds", t.seconds},
                   {"reference_alone_median_ns", t.reference_alone_median_ns}};
    if (include_samples) {
      json rows = json::array();
      for (const TimingSample& s : t.samples)
        rows.push_back({{"reference_ns", s.reference_ns}, {"candidate_ns", s.candidate_ns},
                        {"reference_cpu_ns", s.reference_cpu_ns}, {"candidate_cpu_ns", s.candidate_cpu_ns},
                        {"input_set", s.input_set}, {"candidate_first", s.candidate_first}, {"discarded", s.discarded}});
      j["timing"]["samples"] = rows;
    }
  }
  if (r.profile) {
    const ProfileReport& p = *r.profile;
    json remarks = json::array();
    for (const Remark& m : p.remarks)
      remarks.push_back({{"line", m.line}, {"column", m.column}, {"vectorized", m.vectorized}, {"message", m.message}});
    j["profile"] = {{"achieved_gflops", p.achieved_gflops}, {"achieved_gbps", p.achieved_gbps},
                    {"peak_gflops", p.peak_gflops},         {"peak_gbps", p.peak_gbps},
                    {"fraction_of_peak", p.fraction_of_peak}, {"bound", p.bound},
                    {"arithmetic_intensity", p.arithmetic_intensity}, {"floor_ns", p.floor_ns},
                    {"counters", p.counters},               {"unavailable_counters", p.unavailable_counters},
                    {"vectorization_remarks", remarks}};
  }
  return j;
}

std::string RenderResult(const EvalResult& r, const std::string& source) {
  std::ostringstream out;
  out << r.task_id << " [" << r.backend << "]: " << StatusName(r.status) << " (stage " << StageName(r.stage) << ")\n";
  out << "  " << r.message << "\n";
  for (const Diagnostic& d : r.diagnostics) {
    if (d.severity == "note" && r.status == Status::kOk) continue;
    out << "  " << d.file << ":" << d.line << ":" << d.column << ": " << d.severity << ": " << d.message << "\n";
    if (d.line > 0 && (d.file == "kernel.cpp" || d.file.empty())) {
      out << "    " << d.line << " | " << SourceLine(source, d.line) << "\n";
      if (d.column > 0) out << "    " << std::string(std::to_string(d.line).size(), ' ') << " | " << std::string(d.column - 1, ' ') << "^\n";
    }
  }
  for (const std::string& d : r.details) out << "  " << d << "\n";
  if (r.correctness && r.correctness->trials_run > 0) {
    out << "correctness: " << r.correctness->trials_run << " trials"
        << (r.correctness->deterministic ? ", deterministic" : ", NONDETERMINISTIC") << "\n";
    for (const OutputCheck& c : r.correctness->checks)
      out << "  " << c.output << ": " << c.mismatches << "/" << c.elements << " mismatches, max abs err "
          << Fmt("%.3g", c.max_abs_error) << ", max rel err " << Fmt("%.3g", c.max_rel_error) << "\n";
  }
  if (r.timing) {
    const TimingReport& t = *r.timing;
    out << "timing: " << t.rounds << " rounds (" << t.discarded << " discarded as preempted) in "
        << Fmt("%.2f s", t.seconds) << (t.converged ? ", CI converged" : ", CI NOT converged (budget spent)") << "\n";
    out << Fmt("  reference  median %.1f us  p10 %.1f  p90 %.1f  cv %.1f%%\n", t.reference.median_ns / 1e3,
               t.reference.p10_ns / 1e3, t.reference.p90_ns / 1e3, t.reference.cv * 100);
    out << Fmt("  candidate  median %.1f us  p10 %.1f  p90 %.1f  cv %.1f%%\n", t.candidate.median_ns / 1e3,
               t.candidate.p10_ns / 1e3, t.candidate.p90_ns / 1e3, t.candidate.cv * 100);
    out << Fmt("  speedup    %.3fx  (95%% CI %.3f - %.3f)\n", t.speedup, t.speedup_ci_low, t.speedup_ci_high);
  }
  if (r.profile) {
    const ProfileReport& p = *r.profile;
    if (p.peak_gflops > 0) {
      out << Fmt("roofline: %.1f GFLOP/s of %.1f peak, %.1f GB/s of %.1f; ", p.achieved_gflops, p.peak_gflops,
                 p.achieved_gbps, p.peak_gbps)
          << p.bound << "-bound (intensity " << Fmt("%.2f", p.arithmetic_intensity) << " flop/B), "
          << Fmt("%.0f%% of the bound roof; floor %.1f us\n", p.fraction_of_peak * 100, p.floor_ns / 1e3);
    }
    if (!p.counters.empty()) {
      out << "counters per call:";
      for (const auto& [name, v] : p.counters) out << " " << name << "=" << Fmt("%.0f", v);
      out << "\n";
    }
    if (!p.unavailable_counters.empty()) out << "  (unavailable: " << p.unavailable_counters.size() << " hardware counters)\n";
    int shown = 0;
    for (const Remark& m : p.remarks) {
      if (shown++ == 8) {
        out << "  ... " << p.remarks.size() - 8 << " more remarks\n";
        break;
      }
      out << "  line " << m.line << ": " << (m.vectorized ? "optimized: " : "missed: ") << m.message << "\n";
    }
  }
  if (!r.protections.empty()) {
    out << "sandbox:";
    for (const auto& [name, on] : r.protections) out << " " << name << (on ? "=on" : "=OFF");
    out << "\n";
  }
  out << Fmt("total %.2f s\n", r.seconds);
  return out.str();
}

}  // namespace kernelgym
