#include "policies/agent/agent.h"

#include <algorithm>
#include <iomanip>
#include <random>
#include <sstream>

#include "datasets/trajectory/record_schema.h"
#include "policies/roles/reply_parsers.h"

namespace kernelgym::agent {
namespace {

using nlohmann::json;
using roles::Role;

std::string Fixed(double x, int digits = 2) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << x;
  return s.str();
}

std::string FirstLine(const std::string& text, std::size_t max = 100) {
  std::string line = text.substr(0, text.find('\n'));
  const auto first = line.find_first_not_of(" \t-*");
  line = first == std::string::npos ? "" : line.substr(first);
  return line.size() > max ? line.substr(0, max) + "..." : line;
}

// Every combination of the space, shuffled with the seed and cut to `limit`.
std::vector<std::map<std::string, protocol::KnobValue>> Combinations(
    const std::map<std::string, std::vector<protocol::KnobValue>>& space, int limit, uint64_t seed) {
  std::vector<std::map<std::string, protocol::KnobValue>> out = {{}};
  for (const auto& [name, values] : space) {
    std::vector<std::map<std::string, protocol::KnobValue>> next;
    for (const auto& partial : out)
      for (const auto& v : values) {
        if (next.size() >= 4096) break;  // a space too large to enumerate is sampled from its start
        auto c = partial;
        c[name] = v;
        next.push_back(std::move(c));
      }
    out = std::move(next);
  }
  std::mt19937_64 rng(seed);
  std::shuffle(out.begin(), out.end(), rng);
  if (out.size() > static_cast<std::size_t>(limit)) out.resize(static_cast<std::size_t>(limit));
  return out;
}

}  // namespace

json AgentReport::ToJson() const {
  return {{"env", env},
          {"task", task},
          {"backend", backend},
          {"stop_reason", stop_reason},
          {"model_failure", model_failure},
          {"starter_speedup", starter_speedup},
          {"best_speedup", best_speedup},
          {"best_step", best_step},
          {"steps", steps},
          {"rounds", rounds},
          {"debug_steps", debug_steps},
          {"tuner_steps", tuner_steps},
          {"submitted", submitted},
          {"submit_status", submit_status},
          {"submit_speedup", submit_speedup},
          {"asks", {{"asks", asks.asks}, {"calls", asks.calls}, {"bad_replies", asks.bad_replies},
                    {"failed_calls", asks.failed_calls}, {"refused", asks.refused}}},
          {"chat", chat.ToJson()},
          {"seconds", seconds},
          {"best_source", best_source}};
}

Agent::Agent(client::Client& env, roles::Assistant& assistant, AgentOptions options, std::ostream& log,
             std::ostream* transcript)
    : env_(env), assistant_(assistant), options_(std::move(options)), log_(log), transcript_(transcript) {}

void Agent::Log(const std::string& line) { log_ << "agent: " << line << std::endl; }

bool Agent::BudgetLeft(int steps_needed, std::string& why) const {
  if (over_) {
    why = "the server ended the episode (its evaluation-time or step budget ran out)";
    return false;
  }
  if (const std::string unusable = assistant_.unusable(); !unusable.empty()) {
    why = "the model cannot be asked any more: " + unusable;
    return false;
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  if (elapsed >= options_.time_budget_s) {
    why = "time budget spent (" + Fixed(elapsed, 0) + " s of " + Fixed(options_.time_budget_s, 0) + " s)";
    return false;
  }
  // One step is always kept for the final revert and one for submit.
  if (current_.steps_left < steps_needed + 2) {
    why = "step budget spent (" + std::to_string(current_.steps_left) + " left, kept for revert and submit)";
    return false;
  }
  return true;
}

roles::Variables Agent::BaseVariables() const {
  roles::Variables v = roles::TaskVariables(task_, options_.backend, assistant_.roles());
  v["best_speedup"] = Fixed(best_.speedup);
  v["steps_left"] = std::to_string(current_.steps_left);
  std::string history;
  for (const std::string& h : history_) history += "- " + h + "\n";
  v["history"] = history;
  v["analysis"] = last_analysis_;
  return v;
}

void Agent::Observe(const protocol::Observation& o, const std::string& phase) {
  current_ = o;
  // The submit's stricter re-evaluation of the best kernel reports on it; it is not a new kernel.
  const bool better = phase != "submit" && o.status == record::obs::kStatusOk &&
                      (best_.status != record::obs::kStatusOk || o.speedup > best_.speedup);
  if (better) best_ = Kernel{o.step, o.speedup, o.source, o.text, o.status};
  Log("step " + std::to_string(o.step) + " (" + phase + "): " + o.status +
      (o.status == record::obs::kStatusOk ? " " + Fixed(o.speedup) + "x" : "") +
      (o.reused ? " (re-used)" : "") + (better ? " -- new best" : "") + "; best " + Fixed(best_.speedup) + "x, " +
      std::to_string(o.steps_left) + " steps left" +
      (o.status != record::obs::kStatusOk ? ": " + FirstLine(o.action_error.empty() ? o.message : o.action_error, 160)
                                          : ""));
}

protocol::StepResult Agent::Step(const protocol::Action& action, const std::string& phase) {
  json meta = {{"policy", "kernelgym-agent"}, {"model", options_.model}, {"round", round_}, {"phase", phase}};
  roles::AppendExchanges(pending_, meta);
  pending_.clear();
  protocol::StepResult result = env_.Step(env_id_, action, meta);
  ++report_.steps;
  if (transcript_) {
    *transcript_ << json{{"kind", "step"},       {"round", round_},
                         {"phase", phase},        {"action", std::string(protocol::ActionKind(action))},
                         {"meta", meta},          {"status", result.observation.status},
                         {"speedup", result.observation.speedup}, {"reward", result.reward},
                         {"step", result.observation.step}}
                        .dump(-1, ' ', false, json::error_handler_t::replace)
                 << "\n";
    transcript_->flush();
  }
  Observe(result.observation, phase);
  over_ = result.terminated || result.truncated;
  return result;
}

std::optional<roles::Plan> Agent::AskPlan() {
  roles::Variables v = BaseVariables();
  v["source"] = best_.source;
  v["observation"] = best_.text;
  std::string error;
  const std::optional<roles::Plan> plan = roles::AskPlan(assistant_, v, pending_, error);
  if (!plan) Log("round " + std::to_string(round_) + ": no usable plan (" + error + ")");
  else Log("round " + std::to_string(round_) + ": plan: " + FirstLine(plan->sections.at("Strategy")));
  return plan;
}

std::optional<protocol::Action> Agent::Implement(const roles::Plan& plan) {
  roles::Variables v = BaseVariables();
  v["source"] = current_.source;
  v["plan"] = plan.text;
  std::string error;
  std::optional<protocol::Action> action =
      roles::AskKernelEdit(assistant_, Role::kImplementer, options_.backend, v, pending_, error);
  if (!action) Log("round " + std::to_string(round_) + ": no usable implementation (" + error + ")");
  return action;
}

namespace {

// One line on what a fix did, so the debugger's next attempt knows what was already tried.
std::string DescribeFix(const protocol::Action& fix) {
  if (const auto* e = std::get_if<protocol::EditAction>(&fix))
    return std::to_string(e->edits.size()) + " edit(s), the first replacing `" + FirstLine(e->edits[0].search, 80) +
           "` with `" + FirstLine(e->edits[0].replace, 80) + "`";
  if (std::holds_alternative<protocol::PatchAction>(fix)) return "a diff";
  return "a rewrite of the whole kernel";
}

}  // namespace

void Agent::Debug(const roles::Plan& plan) {
  std::vector<std::string> tried;  // "fix 1 (what it changed) -> what it got"
  for (int attempt = 1; attempt <= options_.debug_attempts && current_.status != record::obs::kStatusOk; ++attempt) {
    std::string why;
    if (!BudgetLeft(1, why)) return;
    roles::Variables v = BaseVariables();
    v["source"] = current_.source;
    v["failure"] = current_.text;
    v["plan"] = plan.text;
    std::string attempts;
    for (const std::string& t : tried) attempts += "- " + t + "\n";
    v["attempts"] = attempts;
    std::string error;
    const std::optional<protocol::Action> fix =
        roles::AskKernelEdit(assistant_, Role::kDebugger, options_.backend, v, pending_, error);
    if (!fix) {
      Log("debug attempt " + std::to_string(attempt) + ": no usable fix (" + error + ")");
      continue;
    }
    ++report_.debug_steps;
    Step(*fix, "debug");
    tried.push_back("fix " + std::to_string(attempt) + " (" + DescribeFix(*fix) + ") -> " + current_.status +
                    (current_.status == record::obs::kStatusOk
                         ? ""
                         : ": " + FirstLine(current_.action_error.empty() ? current_.message : current_.action_error,
                                            300)));
  }
}

std::optional<roles::Analysis> Agent::Analyse() {
  roles::Variables v = BaseVariables();
  v["source"] = best_.source;
  v["observation"] = best_.text;
  std::string error;
  std::optional<roles::Analysis> analysis = roles::AskAnalysis(assistant_, v, pending_, error);
  if (!analysis) {
    Log("round " + std::to_string(round_) + ": no usable analysis (" + error + ")");
    return std::nullopt;
  }
  last_analysis_ = analysis->bottlenecks + "Decision: " + std::string(roles::DecisionName(analysis->decision)) +
                   (analysis->reason.empty() ? "" : " - " + analysis->reason);
  Log("round " + std::to_string(round_) + ": analyst: " + std::string(roles::DecisionName(analysis->decision)) +
      (analysis->reason.empty() ? "" : " - " + FirstLine(analysis->reason)));
  return analysis;
}

void Agent::Tune(const roles::Analysis&) {
  tuned_ = true;
  roles::Variables v = BaseVariables();
  const bool has_template = !v["knobs"].empty();
  v["source"] = best_.source;
  std::string error;
  const std::optional<roles::TunerProposal> proposal =
      roles::AskTuner(assistant_, options_.backend, !has_template, v, pending_, error);
  if (!proposal) {
    Log("tuner: no usable search space (" + error + ")");
    return;
  }
  const auto points = Combinations(proposal->space, options_.tuner_evaluations, options_.seed.value_or(0));
  Log("tuner: " + std::to_string(points.size()) + " settings to evaluate" +
      (has_template ? " with the task's template" : " with its own template"));
  for (const auto& point : points) {
    std::string why;
    if (!BudgetLeft(1, why)) return;
    std::string label;
    for (const auto& [name, value] : point) label += (label.empty() ? "" : ",") + name + "=" + protocol::KnobValueText(value);
    Log("tuner: " + label);
    ++report_.tuner_steps;
    if (has_template) Step(protocol::KnobsAction{point}, "tune");
    else Step(protocol::ReplaceAction{roles::InstantiateTemplate(proposal->template_source, point)}, "tune");
  }
}

void Agent::RevertToBest() {
  if (over_ || current_.step == best_.step || current_.source == best_.source) return;
  Step(protocol::RevertAction{best_.step}, "revert");
}

AgentReport Agent::Run() {
  started_ = std::chrono::steady_clock::now();
  assistant_.BeginRun();
  // The time budget holds inside a chat call too: no request runs past it.
  assistant_.chat().SetDeadline(started_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                               std::chrono::duration<double>(options_.time_budget_s)));
  report_ = {};
  report_.task = options_.task;
  report_.backend = options_.backend;
  task_ = env_.GetTask(options_.task);

  protocol::EnvMakeRequest make;
  make.task = options_.task;
  make.backend = options_.backend;
  make.reward = options_.reward;
  make.max_steps = options_.max_steps;
  make.record = options_.record;
  const protocol::EnvInfo info = env_.Make(make);
  env_id_ = info.env;
  report_.env = env_id_;
  Log("env " + env_id_ + ": " + options_.task + " on " + options_.backend + ", " + std::to_string(info.max_steps) +
      " steps" + (options_.record ? ", recorded" : ""));
  const protocol::ResetResult reset = env_.Reset(env_id_, options_.seed);
  Observe(reset.observation, "reset");
  report_.starter_speedup = best_.speedup;

  int rounds_without_gain = 0;
  std::string why;
  for (round_ = 1; round_ <= options_.rounds; ++round_) {
    if (!BudgetLeft(1, why)) break;
    report_.rounds = round_;
    const double best_before = best_.speedup;
    const std::optional<roles::Plan> plan = AskPlan();
    std::string outcome;
    if (plan) {
      if (!BudgetLeft(1, why)) break;
      if (const std::optional<protocol::Action> action = Implement(*plan)) {
        Step(*action, "implement");
        if (current_.status != record::obs::kStatusOk) Debug(*plan);
        outcome = current_.status + (current_.status == record::obs::kStatusOk ? " " + Fixed(current_.speedup) + "x" : "");
      } else {
        outcome = "no usable implementation";
        roles::MarkProducedNoStep(pending_);  // the plan (and anything before it) led to no step
      }
    } else {
      outcome = "no usable plan";
    }
    const bool gained = best_.speedup > best_before;
    history_.push_back("round " + std::to_string(round_) + ": " +
                       (plan ? FirstLine(plan->sections.at("Strategy")) : std::string("(no plan)")) + " -> " + outcome +
                       (gained ? " (new best " + Fixed(best_.speedup) + "x)" : " (no gain; reverted to the best)"));
    rounds_without_gain = gained ? 0 : rounds_without_gain + 1;
    if (BudgetLeft(0, why)) RevertToBest();
    if (rounds_without_gain >= options_.patience) {
      why = std::to_string(rounds_without_gain) + " rounds in a row without a new best";
      break;
    }
    if (!BudgetLeft(1, why)) break;
    const std::optional<roles::Analysis> analysis = Analyse();
    if (analysis && analysis->decision == roles::Decision::kStop) {
      why = "the analyst expects no more gain: " + analysis->reason;
      break;
    }
    if (analysis && analysis->decision == roles::Decision::kTune && !tuned_) {
      const double before_tuning = best_.speedup;
      Tune(*analysis);
      RevertToBest();
      if (best_.speedup > before_tuning) rounds_without_gain = 0;  // a tuner gain is a gain
    }
    why = "round limit (" + std::to_string(options_.rounds) + ") reached";
  }
  report_.stop_reason = why;
  Log("stopping: " + why);
  const std::string unusable = assistant_.unusable();
  if (!assistant_.any_usable_reply()) {
    report_.model_failure = "no usable reply from the model" + (unusable.empty() ? std::string() : ": " + unusable);
  } else if (assistant_.endpoint_failed()) {
    report_.model_failure = unusable;
  }

  if (!over_) RevertToBest();
  if (!over_) {
    const protocol::StepResult submit = Step(protocol::SubmitAction{}, "submit");
    report_.submitted = submit.terminated;
    report_.submit_status = submit.observation.status;
    report_.submit_speedup = submit.observation.speedup;
  } else {
    Log("not submitted: the episode is over");
  }
  report_.best_speedup = best_.speedup;
  report_.best_step = best_.step;
  report_.best_source = best_.source;
  report_.asks = assistant_.stats();
  report_.chat = assistant_.chat().totals();
  report_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  env_.Close(env_id_);
  return report_;
}

}  // namespace kernelgym::agent
