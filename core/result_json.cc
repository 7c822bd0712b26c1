#include "core/result_json.h"

#include <algorithm>

#include <cmath>
#include <cstdio>
#include <limits>
#include <set>
#include <sstream>

#include "core/text_safety.h"

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


// The wire form's label on a SpeedEstimate: whoever reads the record sees it is not a measurement.
constexpr const char* kEstimateLabel = "estimate";
// The estimate's figures under protocol version 1's names in `estimates`, derived from it.
constexpr const char* kDerivedEstimateKeys[] = {"candidate_estimated_tpu_us", "reference_estimated_tpu_us",
                                                "candidate_estimate_trusted", "reference_estimate_trusted",
                                                "estimate_trusted",           "estimated_speedup",
                                                "estimated_speedup_untrusted"};

// Thrown inside ResultFromJson only, which turns it into `problem`.
struct ReadFailure {
  std::string message;
};

std::string TypeName(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a float";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "binary";
  }
}

[[noreturn]] void Fail(const std::string& where, const std::string& what) { throw ReadFailure{where + ": " + what}; }

// The fields of one JSON object, read strictly: every field read is required unless looked up
// with Find, wrong types fail, and Finish fails on any field nobody read.
class Fields {
 public:
  Fields(const json& object, std::string where) : object_(object), where_(std::move(where)) {
    if (!object.is_object()) Fail(where_, "must be an object, not " + TypeName(object));
  }

  const json* Find(const std::string& key) {
    used_.insert(key);
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }
  const json& Require(const std::string& key) {
    const json* j = Find(key);
    if (!j) Fail(where_, "needs the field '" + key + "'");
    return *j;
  }
  std::string Path(const std::string& key) const { return where_ + "." + key; }

  void Finish() const {
    for (const auto& [key, value] : object_.items())
      if (!used_.count(key)) Fail(where_, "has an unknown field '" + key + "'");
  }

 private:
  const json& object_;
  std::string where_;
  std::set<std::string> used_;
};

std::string ReadString(const json& j, const std::string& where) {
  if (!j.is_string()) Fail(where, "must be a string, not " + TypeName(j));
  return j.get<std::string>();
}
bool ReadBool(const json& j, const std::string& where) {
  if (!j.is_boolean()) Fail(where, "must be a boolean, not " + TypeName(j));
  return j.get<bool>();
}
double ReadNumber(const json& j, const std::string& where) {
  if (j.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!j.is_number()) Fail(where, "must be a number, not " + TypeName(j));
  return j.get<double>();
}
int64_t ReadInt64(const json& j, const std::string& where) {
  if (j.is_number_unsigned()) {
    if (j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) Fail(where, "is out of range");
    return static_cast<int64_t>(j.get<uint64_t>());
  }
  if (!j.is_number_integer()) Fail(where, "must be an integer, not " + TypeName(j));
  return j.get<int64_t>();
}
int ReadInt(const json& j, const std::string& where) {
  const int64_t v = ReadInt64(j, where);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) Fail(where, "is out of range");
  return static_cast<int>(v);
}
uint64_t ReadUnsigned(const json& j, const std::string& where) {
  if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<int64_t>() >= 0))
    Fail(where, "must be a non-negative integer, not " + TypeName(j));
  return j.get<uint64_t>();
}

template <typename Read>
auto ReadArray(const json& j, const std::string& where, Read read) {
  if (!j.is_array()) Fail(where, "must be an array, not " + TypeName(j));
  std::vector<decltype(read(j, where))> values;
  for (std::size_t i = 0; i < j.size(); ++i) values.push_back(read(j[i], where + "[" + std::to_string(i) + "]"));
  return values;
}
template <typename Read>
auto ReadMap(const json& j, const std::string& where, Read read) {
  if (!j.is_object()) Fail(where, "must be an object, not " + TypeName(j));
  std::map<std::string, decltype(read(j, where))> values;
  for (const auto& [key, value] : j.items()) values[key] = read(value, where + "." + key);
  return values;
}

TimeStats ReadStats(const json& j, const std::string& where) {
  Fields f(j, where);
  TimeStats s;
  s.median_ns = ReadNumber(f.Require("median_ns"), f.Path("median_ns"));
  s.p10_ns = ReadNumber(f.Require("p10_ns"), f.Path("p10_ns"));
  s.p90_ns = ReadNumber(f.Require("p90_ns"), f.Path("p90_ns"));
  s.min_ns = ReadNumber(f.Require("min_ns"), f.Path("min_ns"));
  s.cv = ReadNumber(f.Require("cv"), f.Path("cv"));
  f.Finish();
  return s;
}

Diagnostic ReadDiagnostic(const json& j, const std::string& where) {
  Fields f(j, where);
  Diagnostic d;
  d.file = ReadString(f.Require("file"), f.Path("file"));
  d.line = ReadInt(f.Require("line"), f.Path("line"));
  d.column = ReadInt(f.Require("column"), f.Path("column"));
  d.severity = ReadString(f.Require("severity"), f.Path("severity"));
  d.message = ReadString(f.Require("message"), f.Path("message"));
  f.Finish();
  return d;
}

OutputCheck ReadCheck(const json& j, const std::string& where) {
  Fields f(j, where);
  OutputCheck c;
  c.output = ReadString(f.Require("output"), f.Path("output"));
  c.elements = ReadInt64(f.Require("elements"), f.Path("elements"));
  c.mismatches = ReadInt64(f.Require("mismatches"), f.Path("mismatches"));
  c.non_finite = ReadInt64(f.Require("non_finite"), f.Path("non_finite"));
  c.max_abs_error = ReadNumber(f.Require("max_abs_error"), f.Path("max_abs_error"));
  c.max_rel_error = ReadNumber(f.Require("max_rel_error"), f.Path("max_rel_error"));
  c.first_mismatch_index = ReadArray(f.Require("first_mismatch"), f.Path("first_mismatch"), ReadInt64);
  // Absent in results written before the flat index was exported.
  if (const json* flat = f.Find("first_mismatch_flat"))
    c.first_mismatch = ReadInt64(*flat, f.Path("first_mismatch_flat"));
  c.expected = ReadNumber(f.Require("expected"), f.Path("expected"));
  c.actual = ReadNumber(f.Require("actual"), f.Path("actual"));
  f.Finish();
  return c;
}

CorrectnessReport ReadCorrectness(const json& j, const std::string& where) {
  Fields f(j, where);
  CorrectnessReport r;
  r.trials_run = ReadInt(f.Require("trials"), f.Path("trials"));
  r.seeds = ReadArray(f.Require("seeds"), f.Path("seeds"), ReadUnsigned);
  r.deterministic = ReadBool(f.Require("deterministic"), f.Path("deterministic"));
  r.checks = ReadArray(f.Require("checks"), f.Path("checks"), ReadCheck);
  f.Finish();
  return r;
}

TimingSample ReadSample(const json& j, const std::string& where) {
  Fields f(j, where);
  TimingSample s;
  s.reference_ns = ReadNumber(f.Require("reference_ns"), f.Path("reference_ns"));
  s.candidate_ns = ReadNumber(f.Require("candidate_ns"), f.Path("candidate_ns"));
  s.reference_cpu_ns = ReadNumber(f.Require("reference_cpu_ns"), f.Path("reference_cpu_ns"));
  s.candidate_cpu_ns = ReadNumber(f.Require("candidate_cpu_ns"), f.Path("candidate_cpu_ns"));
  s.input_set = ReadInt(f.Require("input_set"), f.Path("input_set"));
  s.candidate_first = ReadBool(f.Require("candidate_first"), f.Path("candidate_first"));
  s.discarded = ReadBool(f.Require("discarded"), f.Path("discarded"));
  f.Finish();
  return s;
}

HostLoad ReadHostLoad(const json& j, const std::string& where) {
  Fields f(j, where);
  HostLoad h;
  h.sampled = true;
  h.cpus = ReadInt(f.Require("cpus"), f.Path("cpus"));
  h.load_avg_1m = ReadNumber(f.Require("load_avg_1m"), f.Path("load_avg_1m"));
  h.procs_running = ReadInt(f.Require("procs_running"), f.Path("procs_running"));
  h.busy_fraction = ReadNumber(f.Require("busy_fraction"), f.Path("busy_fraction"));
  h.steal_fraction = ReadNumber(f.Require("steal_fraction"), f.Path("steal_fraction"));
  f.Finish();
  return h;
}

TimingReport ReadTiming(const json& j, const std::string& where) {
  Fields f(j, where);
  TimingReport t;
  t.reference = ReadStats(f.Require("reference"), f.Path("reference"));
  t.candidate = ReadStats(f.Require("candidate"), f.Path("candidate"));
  t.speedup = ReadNumber(f.Require("speedup"), f.Path("speedup"));
  const std::vector<double> ci = ReadArray(f.Require("speedup_ci95"), f.Path("speedup_ci95"), ReadNumber);
  if (ci.size() != 2) Fail(f.Path("speedup_ci95"), "must hold 2 numbers, not " + std::to_string(ci.size()));
  t.speedup_ci_low = ci[0];
  t.speedup_ci_high = ci[1];
  t.converged = ReadBool(f.Require("converged"), f.Path("converged"));
  t.rounds = ReadInt(f.Require("rounds"), f.Path("rounds"));
  t.discarded = ReadInt(f.Require("discarded"), f.Path("discarded"));
  t.seconds = ReadNumber(f.Require("seconds"), f.Path("seconds"));
  t.reference_alone_median_ns = ReadNumber(f.Require("reference_alone_median_ns"), f.Path("reference_alone_median_ns"));
  if (const json* h = f.Find("host")) t.host = ReadHostLoad(*h, f.Path("host"));
  if (const json* s = f.Find("scheduling")) t.scheduling = ReadString(*s, f.Path("scheduling"));
  if (const json* samples = f.Find("samples")) t.samples = ReadArray(*samples, f.Path("samples"), ReadSample);
  f.Finish();
  return t;
}

Remark ReadRemark(const json& j, const std::string& where) {
  Fields f(j, where);
  Remark m;
  m.line = ReadInt(f.Require("line"), f.Path("line"));
  m.column = ReadInt(f.Require("column"), f.Path("column"));
  m.vectorized = ReadBool(f.Require("vectorized"), f.Path("vectorized"));
  m.message = ReadString(f.Require("message"), f.Path("message"));
  f.Finish();
  return m;
}

ProfileReport ReadProfile(const json& j, const std::string& where) {
  Fields f(j, where);
  ProfileReport p;
  p.achieved_gflops = ReadNumber(f.Require("achieved_gflops"), f.Path("achieved_gflops"));
  p.achieved_gbps = ReadNumber(f.Require("achieved_gbps"), f.Path("achieved_gbps"));
  p.peak_gflops = ReadNumber(f.Require("peak_gflops"), f.Path("peak_gflops"));
  p.peak_gbps = ReadNumber(f.Require("peak_gbps"), f.Path("peak_gbps"));
  p.fraction_of_peak = ReadNumber(f.Require("fraction_of_peak"), f.Path("fraction_of_peak"));
  p.bound = ReadString(f.Require("bound"), f.Path("bound"));
  p.arithmetic_intensity = ReadNumber(f.Require("arithmetic_intensity"), f.Path("arithmetic_intensity"));
  p.floor_ns = ReadNumber(f.Require("floor_ns"), f.Path("floor_ns"));
  p.counters = ReadMap(f.Require("counters"), f.Path("counters"), ReadNumber);
  p.unavailable_counters = ReadArray(f.Require("unavailable_counters"), f.Path("unavailable_counters"), ReadString);
  p.remarks = ReadArray(f.Require("vectorization_remarks"), f.Path("vectorization_remarks"), ReadRemark);
  f.Finish();
  return p;
}

TpuKernelProfile ReadTpuKernelProfile(const json& j, const std::string& where) {
  Fields f(j, where);
  TpuKernelProfile k;
  k.kernel = ReadString(f.Require("kernel"), f.Path("kernel"));
  k.grid_steps = ReadNumber(f.Require("grid_steps"), f.Path("grid_steps"));
  k.bundles_per_step = ReadNumber(f.Require("bundles_per_step"), f.Path("bundles_per_step"));
  k.estimated_cycles = ReadNumber(f.Require("estimated_cycles"), f.Path("estimated_cycles"));
  k.unit_share = ReadMap(f.Require("unit_share"), f.Path("unit_share"), ReadNumber);
  k.critical_path_cycles = ReadNumber(f.Require("critical_path_cycles"), f.Path("critical_path_cycles"));
  f.Finish();
  return k;
}

SpeedEstimate ReadSpeedEstimate(const json& j, const std::string& where) {
  Fields f(j, where);
  if (ReadString(f.Require("label"), f.Path("label")) != kEstimateLabel)
    Fail(f.Path("label"), std::string("must be '") + kEstimateLabel + "'");
  SpeedEstimate e;
  e.method = ReadString(f.Require("method"), f.Path("method"));
  e.candidate_us = ReadNumber(f.Require("candidate_us"), f.Path("candidate_us"));
  e.reference_us = ReadNumber(f.Require("reference_us"), f.Path("reference_us"));
  e.candidate_trusted = ReadBool(f.Require("candidate_trusted"), f.Path("candidate_trusted"));
  e.reference_trusted = ReadBool(f.Require("reference_trusted"), f.Path("reference_trusted"));
  e.speedup = ReadNumber(f.Require("speedup"), f.Path("speedup"));
  e.trusted = ReadBool(f.Require("trusted"), f.Path("trusted"));
  e.reasons = ReadArray(f.Require("reasons"), f.Path("reasons"), ReadString);
  f.Finish();
  return e;
}

EvalResult ReadResult(const json& j) {
  Fields f(j, "result");
  EvalResult r;
  r.task_id = ReadString(f.Require("task"), f.Path("task"));
  r.backend = ReadString(f.Require("backend"), f.Path("backend"));
  const std::string status = ReadString(f.Require("status"), f.Path("status"));
  const std::optional<Status> parsed_status = ParseStatus(status);
  if (!parsed_status) Fail(f.Path("status"), "unknown status '" + status + "'");
  r.status = *parsed_status;
  const std::string stage = ReadString(f.Require("stage"), f.Path("stage"));
  const std::optional<Stage> parsed_stage = ParseStage(stage);
  if (!parsed_stage) Fail(f.Path("stage"), "unknown stage '" + stage + "'");
  r.stage = *parsed_stage;
  r.message = ReadString(f.Require("message"), f.Path("message"));
  r.details = ReadArray(f.Require("details"), f.Path("details"), ReadString);
  r.diagnostics = ReadArray(f.Require("diagnostics"), f.Path("diagnostics"), ReadDiagnostic);
  r.compile_cached = ReadBool(f.Require("compile_cached"), f.Path("compile_cached"));
  if (const json* c = f.Find("correctness")) r.correctness = ReadCorrectness(*c, f.Path("correctness"));
  if (const json* t = f.Find("timing")) r.timing = ReadTiming(*t, f.Path("timing"));
  // The top-level speedup repeats timing.speedup for readers of the JSON; it carries nothing else.
  if (const json* s = f.Find("speedup")) {
    if (!r.timing) Fail(f.Path("speedup"), "is present without 'timing'");
    ReadNumber(*s, f.Path("speedup"));
  }
  if (const json* p = f.Find("profile")) r.profile = ReadProfile(*p, f.Path("profile"));
  r.protections = ReadMap(f.Require("protections"), f.Path("protections"), ReadBool);
  r.stage_seconds = ReadMap(f.Require("stage_seconds"), f.Path("stage_seconds"), ReadNumber);
  r.seconds = ReadNumber(f.Require("seconds"), f.Path("seconds"));
  if (const json* v = f.Find("timing_representative")) r.timing_representative = ReadBool(*v, f.Path("timing_representative"));
  if (const json* v = f.Find("timing_clock")) r.timing_clock = ReadString(*v, f.Path("timing_clock"));
  if (const json* v = f.Find("timing_note")) r.timing_note = ReadString(*v, f.Path("timing_note"));
  if (const json* v = f.Find("estimate")) r.estimate = ReadSpeedEstimate(*v, f.Path("estimate"));
  if (const json* v = f.Find("estimates")) r.estimates = ReadMap(*v, f.Path("estimates"), ReadNumber);
  // The estimate's figures under their version-1 names are derived from `estimate` (see
  // ValidResultToJson): read, checked for type, never trusted.
  for (const char* key : kDerivedEstimateKeys) r.estimates.erase(key);
  if (const json* v = f.Find("estimate_reasons")) ReadArray(*v, f.Path("estimate_reasons"), ReadString);
  if (const json* v = f.Find("tpu_profile")) r.tpu_profile = ReadArray(*v, f.Path("tpu_profile"), ReadTpuKernelProfile);
  // Like the top-level speedup, speedup_kind is derived (RewardableSpeedupOf): read, never trusted.
  if (const json* v = f.Find("speedup_kind")) ReadString(*v, f.Path("speedup_kind"));
  f.Finish();
  return r;
}

}  // namespace

std::optional<EvalResult> ResultFromJson(const json& j, std::string& problem) {
  try {
    return ReadResult(j);
  } catch (const ReadFailure& failure) {
    problem = failure.message;
  } catch (const std::exception& e) {  // a bug here must still be an answer, not a crash
    problem = std::string("result: cannot be read: ") + e.what();
  }
  return std::nullopt;
}

namespace {

json ValidResultToJson(const EvalResult& r, bool include_samples) {
  json j{{"task", r.task_id},
         {"backend", r.backend},
         {"status", std::string(StatusName(r.status))},
         {"stage", std::string(StageName(r.stage))},
         {"message", r.message},
         {"details", r.details},
         {"compile_cached", r.compile_cached},
         {"protections", r.protections},
         {"stage_seconds", r.stage_seconds},
         {"seconds", r.seconds},
         {"timing_representative", r.timing_representative},
         {"timing_clock", r.timing_clock},
         {"timing_note", r.timing_note},
         {"estimates", r.estimates}};
  j["speedup_kind"] = std::string(SpeedupKindName(RewardableSpeedupOf(r).kind));
  if (r.estimate) {
    const SpeedEstimate& e = *r.estimate;
    j["estimate"] = {{"label", kEstimateLabel},         {"method", e.method},
                     {"candidate_us", e.candidate_us},  {"reference_us", e.reference_us},
                     {"candidate_trusted", e.candidate_trusted}, {"reference_trusted", e.reference_trusted},
                     {"speedup", e.speedup},            {"trusted", e.trusted},
                     {"reasons", e.reasons}};
    // Protocol version 1's names for the same figures, for the clients that read them there:
    // derived from `estimate`, never read back (ReadResult drops them).
    json& legacy = j["estimates"];
    if (e.candidate_us > 0) legacy["candidate_estimated_tpu_us"] = e.candidate_us;
    if (e.reference_us > 0) legacy["reference_estimated_tpu_us"] = e.reference_us;
    legacy["candidate_estimate_trusted"] = e.candidate_trusted ? 1 : 0;
    legacy["reference_estimate_trusted"] = e.reference_trusted ? 1 : 0;
    legacy["estimate_trusted"] = e.trusted ? 1 : 0;
    if (e.speedup > 0) legacy[e.trusted ? "estimated_speedup" : "estimated_speedup_untrusted"] = e.speedup;
    if (!e.reasons.empty()) j["estimate_reasons"] = e.reasons;
  }
  if (!r.tpu_profile.empty()) {
    json kernels = json::array();
    for (const TpuKernelProfile& k : r.tpu_profile)
      kernels.push_back({{"kernel", k.kernel}, {"grid_steps", k.grid_steps}, {"bundles_per_step", k.bundles_per_step},
                         {"estimated_cycles", k.estimated_cycles}, {"unit_share", k.unit_share},
                         {"critical_path_cycles", k.critical_path_cycles}});
    j["tpu_profile"] = kernels;
  }
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
                        {"first_mismatch_flat", c.first_mismatch}, {"expected", c.expected}, {"actual", c.actual}});
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
    if (!t.scheduling.empty()) j["timing"]["scheduling"] = t.scheduling;
    if (t.host.sampled)  // written only when read, so records from before it or without /proc stay as they were
      j["timing"]["host"] = {{"cpus", t.host.cpus},
                             {"load_avg_1m", t.host.load_avg_1m},
                             {"procs_running", t.host.procs_running},
                             {"busy_fraction", t.host.busy_fraction},
                             {"steal_fraction", t.host.steal_fraction}};
    if (include_samples) j["timing"]["samples"] = TimingSamplesToJson(t.samples);
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

}  // namespace

json TimingSamplesToJson(const std::vector<TimingSample>& samples) {
  json rows = json::array();
  for (const TimingSample& s : samples)
    rows.push_back({{"reference_ns", s.reference_ns}, {"candidate_ns", s.candidate_ns},
                    {"reference_cpu_ns", s.reference_cpu_ns}, {"candidate_cpu_ns", s.candidate_cpu_ns},
                    {"input_set", s.input_set}, {"candidate_first", s.candidate_first}, {"discarded", s.discarded}});
  return rows;
}

json ResultToJson(const EvalResult& r, bool include_samples) {
  // nlohmann's dump() throws on invalid UTF-8 and msgpack strings must be UTF-8: a result that
  // did not pass through MakeResultTextValid (a backend built outside the registry, a test) is
  // made valid here, on a copy.
  if (ResultTextIsValid(r)) return ValidResultToJson(r, include_samples);
  EvalResult valid = r;
  MakeResultTextValid(valid);
  return ValidResultToJson(valid, include_samples);
}

namespace {

// The report's layout is what keeps a candidate from forging it: the report's own lines (the
// verdict first and last, section headings) start in column 0, and nothing the candidate wrote
// does. Candidate text (process output, the compiler's words about its source, names from its
// shared object, its source lines) appears only after a label on a line the report starts, or as
// a quoted continuation line behind "    | ", and always through PrintableText, so it can neither
// start a line of its own nor move the cursor, erase or re-order what is on screen.
constexpr std::string_view kQuote = "    | ";

// `text`'s first line after `lead`, its further lines quoted.
void Quoted(std::ostringstream& out, std::string_view lead, const std::string& text) {
  std::string printable = PrintableText(text, /*keep_newlines=*/true);
  while (!printable.empty() && printable.back() == '\n') printable.pop_back();
  std::string_view rest = printable, prefix = lead;
  for (;;) {
    const std::size_t end = rest.find('\n');
    out << prefix << rest.substr(0, end) << "\n";
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
    prefix = kQuote;
  }
}

std::string One(const std::string& text) { return PrintableText(text); }

std::string VerdictLine(const EvalResult& r) {
  return std::string(StatusName(r.status)) + " (stage " + std::string(StageName(r.stage)) + ")";
}

}  // namespace

std::string RenderResult(const EvalResult& r, const std::string& source) {
  std::ostringstream out;
  out << One(r.task_id) << " [" << One(r.backend) << "]: " << VerdictLine(r) << "\n";
  Quoted(out, "  ", r.message);
  for (const Diagnostic& d : r.diagnostics) {
    if (d.severity == "note" && r.status == Status::kOk) continue;
    out << "  " << One(d.file) << ":" << d.line << ":" << d.column << ": " << One(d.severity) << ": " << One(d.message)
        << "\n";
    if (d.line > 0 && (d.file == "kernel.cpp" || d.file.empty())) {
      const std::string line = SourceLine(source, d.line);
      out << "    " << d.line << " | " << One(line) << "\n";
      if (d.column > 0 && static_cast<std::size_t>(d.column) <= line.size() + 1)
        out << "    " << std::string(std::to_string(d.line).size(), ' ') << " | " << std::string(d.column - 1, ' ')
            << "^\n";
    }
  }
  // Details mix the runner's notes with output quoted from the candidate's process (a stderr
  // head): each is an item, its further lines quoted.
  for (const std::string& d : r.details) Quoted(out, "  - ", d);
  if (r.correctness && r.correctness->trials_run > 0) {
    out << "correctness: " << r.correctness->trials_run << " trials"
        << (r.correctness->deterministic ? ", deterministic" : ", NONDETERMINISTIC") << "\n";
    for (const OutputCheck& c : r.correctness->checks)
      out << "  " << One(c.output) << ": " << c.mismatches << "/" << c.elements << " mismatches, max abs err "
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
          << One(p.bound) << "-bound (intensity " << Fmt("%.2f", p.arithmetic_intensity) << " flop/B), "
          << Fmt("%.0f%% of the bound roof; floor %.1f us\n", p.fraction_of_peak * 100, p.floor_ns / 1e3);
    }
    if (!p.counters.empty()) {
      out << "counters per call:";
      for (const auto& [name, v] : p.counters) out << " " << One(name) << "=" << Fmt("%.0f", v);
      out << "\n";
    }
    if (!p.unavailable_counters.empty()) out << "  (unavailable: " << p.unavailable_counters.size() << " hardware counters)\n";
    int shown = 0;
    for (const Remark& m : p.remarks) {
      if (shown++ == 8) {
        out << "  ... " << p.remarks.size() - 8 << " more remarks\n";
        break;
      }
      out << "  line " << m.line << ": " << (m.vectorized ? "optimized: " : "missed: ") << One(m.message) << "\n";
    }
  }
  if (r.status == Status::kOk && !r.timing_representative && !r.timing_note.empty())
    out << "timing: not representative: " << One(r.timing_note) << "\n";
  for (const std::string& line : RenderStaticEstimate(r)) out << line << "\n";
  if (!r.estimates.empty()) {
    out << "estimates and compile facts (not measurements):";
    for (const auto& [name, v] : r.estimates) out << " " << One(name) << "=" << Fmt("%.4g", v);
    out << "\n";
  }
  if (!r.protections.empty()) {
    out << "sandbox:";
    for (const auto& [name, on] : r.protections) out << " " << One(name) << (on ? "=on" : "=OFF");
    out << "\n";
  }
  out << Fmt("total %.2f s\n", r.seconds);
  // The verdict again, last: where a reader's eye lands after the quoted output above it.
  out << "verdict: " << VerdictLine(r) << "\n";
  return out.str();
}

std::vector<std::string> RenderStaticEstimate(const EvalResult& r) {
  constexpr std::size_t kShown = 4;
  std::vector<std::string> lines;
  if (const RewardableSpeedup s = RewardableSpeedupOf(r); s.kind == SpeedupKind::kEstimated)
    lines.push_back("speed: estimated " + Fmt("%.3f", s.value) +
                    "x over the reference on the TPU (the compiler's static figures, not a measurement)");
  if (r.estimate) {
    const SpeedEstimate& e = *r.estimate;
    std::string line = "estimate (not a measurement): candidate " +
                       (e.candidate_us > 0 ? Fmt("%.4g", e.candidate_us) + " us" : std::string("none")) +
                       ", reference " + (e.reference_us > 0 ? Fmt("%.4g", e.reference_us) + " us" : std::string("none"));
    if (e.speedup > 0) line += ", ratio " + Fmt("%.3f", e.speedup) + "x";
    if (!e.method.empty()) line += " (" + One(e.method) + ")";
    lines.push_back(line + (e.trusted ? "; trusted" : "; not trusted"));
    for (const std::string& reason : e.reasons) lines.push_back("estimate not trusted: " + One(reason));
  }
  const std::vector<TpuKernelProfile>& kernels = r.tpu_profile;
  for (std::size_t i = 0; i < kernels.size() && i < kShown; ++i) {
    const TpuKernelProfile& k = kernels[i];
    std::string line = "tpu kernel " + One(k.kernel) + ": " + Fmt("%.0f", k.grid_steps) + " grid steps x " +
                       Fmt("%.0f", k.bundles_per_step) + " bundles, " + Fmt("%.0f", k.estimated_cycles) +
                       " cycles (compiler's estimate)";
    std::vector<std::pair<std::string, double>> units(k.unit_share.begin(), k.unit_share.end());
    std::sort(units.begin(), units.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    if (!units.empty()) {
      line += "; bundles issuing";
      for (std::size_t u = 0; u < units.size(); ++u)
        line += (u ? ", " : " ") + One(units[u].first) + " " + Fmt("%.0f%%", 100 * units[u].second);
    }
    if (k.critical_path_cycles > 0) line += "; critical path " + Fmt("%.0f", k.critical_path_cycles) + " cycles";
    lines.push_back(std::move(line));
  }
  if (kernels.size() > kShown) lines.push_back("  ... " + std::to_string(kernels.size() - kShown) + " more kernels");
  return lines;
}

std::string SourceLine(const std::string& source, int line) {
  std::istringstream in(source);
  std::string text;
  for (int i = 1; std::getline(in, text); ++i)
    if (i == line) return text;
  return {};
}

}  // namespace kernelgym
