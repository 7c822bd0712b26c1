#include "policies/hitl/hitl.h"

#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "core/backend_info.h"
#include "datasets/trajectory/record_schema.h"
#include "policies/roles/reply_parsers.h"

namespace kernelgym::hitl {
namespace {

using nlohmann::json;
using roles::Role;

constexpr const char* kPrompt = "kernelgym> ";

std::string ReadFile(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::filesystem::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
}

std::string Fixed(double x) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(2) << x;
  return s.str();
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

HitlSession::HitlSession(client::Client& env, roles::Assistant* assistant, HitlOptions options, std::istream& in,
                         std::ostream& out)
    : env_(env), assistant_(assistant), options_(std::move(options)), in_(in), out_(out) {
  char dir_template[] = "/tmp/kernelgym-hitl-XXXXXX";
  if (mkdtemp(dir_template)) dir_ = dir_template;
  working_ = dir_ / BackendInfoOr(options_.backend).source_file;
  plan_file_ = dir_ / "plan.md";
}

HitlSession::~HitlSession() {
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

void HitlSession::Help() const {
  out_ << "commands:\n"
          "  show              the latest observation\n"
          "  source            the current kernel\n"
          "  history           one line per step\n"
          "  edit              open the kernel in your editor (then `run`)\n"
          "  run               evaluate the kernel as you edited it\n"
          "  knobs A=1,B=x     evaluate the task's template with these values\n"
          "  revert N          make step N's kernel current again\n"
          "  submit            the final, stricter evaluation; ends the episode\n"
          "  quit              leave without submitting\n"
          "with a model (--endpoint, --model):\n"
          "  plan [NOTE]       ask the planner for a plan (NOTE: a hint for it)\n"
          "  plan edit         edit the plan in your editor before it is implemented\n"
          "  implement [NOTE]  the implementer applies the plan; the result is evaluated\n"
          "  analyze           the profiler analyst reads the latest observation\n"
          "  debug [NOTE]      the debugger fixes the latest failure; the fix is evaluated\n";
}

void HitlSession::Show(const protocol::Observation& o) const {
  out_ << "\n" << o.text << "\n";
  out_ << "step " << o.step << ": " << o.status << (o.status == record::obs::kStatusOk ? " " + Fixed(o.speedup) + "x" : "")
       << " (best " << Fixed(best_speedup_) << "x), " << o.steps_left << " steps left\n";
}

bool HitlSession::NeedsModel() const {
  if (assistant_) {
    const std::string unusable = assistant_->unusable();
    if (unusable.empty()) return true;
    out_ << "the model cannot be asked any more: " << unusable << "\n(you can still `edit` and `run` yourself)\n";
    return false;
  }
  out_ << "no model configured: start with --endpoint URL --model NAME to use the planner, implementer, "
          "analyst and debugger (you are the implementer: `edit`, then `run`)\n";
  return false;
}

bool HitlSession::OpenInEditor(const std::filesystem::path& file) {
  std::string editor = options_.editor;
  for (const char* var : {"VISUAL", "EDITOR"})
    if (editor.empty())
      if (const char* e = std::getenv(var); e && *e) editor = e;
  if (editor.empty()) editor = "vi";
  out_.flush();
  // The editor owns the terminal until it exits.
  const int rc = std::system((editor + " " + ShellQuote(file.string())).c_str());
  if (rc != 0) {
    out_ << "the editor (" << editor << ") exited with status " << rc << "; nothing changed\n";
    return false;
  }
  return true;
}

roles::Variables HitlSession::Variables(const std::string& note) const {
  roles::Variables v = roles::TaskVariables(task_, options_.backend, assistant_->roles());
  v["source"] = current_.source;
  v["observation"] = current_.text;
  v["plan"] = plan_;
  v["note"] = note;
  v["best_speedup"] = Fixed(best_speedup_);
  v["steps_left"] = std::to_string(current_.steps_left);
  std::string history;
  for (const std::string& h : history_) history += "- " + h + "\n";
  v["history"] = history;
  return v;
}

std::optional<protocol::Action> HitlSession::AskForEdit(Role role, const roles::Variables& v) {
  std::string error;
  out_ << "asking the " << roles::RoleName(role) << "...\n" << std::flush;
  std::optional<protocol::Action> action =
      roles::AskKernelEdit(*assistant_, role, options_.backend, v, pending_, error);
  if (!action) out_ << "no usable " << roles::RoleName(role) << " reply: " << error << "\n";
  return action;
}

void HitlSession::Step(const protocol::Action& action, const std::string& actor) {
  json meta = {{"policy", "kernelgym-hitl"}, {"actor", actor}, {"model", options_.model}};
  roles::AppendExchanges(pending_, meta);
  pending_.clear();
  out_ << "evaluating...\n" << std::flush;
  const protocol::StepResult result = env_.Step(env_id_, action, meta);
  current_ = result.observation;
  best_speedup_ = std::max(best_speedup_, current_.best_speedup);
  WriteFile(working_, current_.source);
  history_.push_back("step " + std::to_string(current_.step) + " (" + std::string(protocol::ActionKind(action)) +
                     " by " + actor + "): " + current_.status +
                     (current_.status == record::obs::kStatusOk ? " " + Fixed(current_.speedup) + "x" : "") +
                     ", reward " + Fixed(result.reward));
  Show(current_);
  out_ << "reward " << Fixed(result.reward) << (result.terminated ? ", terminated" : "")
       << (result.truncated ? ", truncated (budget spent)" : "") << "\n";
  if (result.terminated || result.truncated) {
    over_ = true;
    submitted_ok_ = result.terminated && current_.status == record::obs::kStatusOk;
  }
}

bool HitlSession::Execute(const std::string& line) {
  std::istringstream words(line);
  std::string command;
  words >> command;
  std::string rest;
  std::getline(words, rest);
  if (const auto first = rest.find_first_not_of(' '); first != std::string::npos) rest = rest.substr(first);
  else rest.clear();

  if (command.empty()) return true;
  if (command == "help" || command == "?") Help();
  else if (command == "quit" || command == "exit") return false;
  else if (command == "show") Show(current_);
  else if (command == "source") out_ << "```" << roles::FenceLanguage(options_.backend) << "\n" << current_.source << "```\n";
  else if (command == "history") {
    if (history_.empty()) out_ << "no steps yet\n";
    for (const std::string& h : history_) out_ << h << "\n";
  } else if (command == "edit") {
    if (OpenInEditor(working_))
      out_ << (ReadFile(working_) == current_.source ? "no change; " : "edited; ") << "`run` evaluates it\n";
  } else if (command == "run") {
    Step(protocol::ReplaceAction{ReadFile(working_)}, "human");
  } else if (command == "knobs") {
    const auto values = protocol::ParseKnobList(rest);
    if (!values) out_ << "knobs takes NAME=value[,NAME=value...]\n";
    else Step(protocol::KnobsAction{*values}, "human");
  } else if (command == "revert") {
    char* end = nullptr;
    const long long to = std::strtoll(rest.c_str(), &end, 10);
    if (rest.empty() || *end != '\0') out_ << "revert takes a step number (see `history`)\n";
    else Step(protocol::RevertAction{to}, "human");
  } else if (command == "submit") {
    Step(protocol::SubmitAction{}, "human");
  } else if (command == "plan" && rest == "edit") {
    if (plan_.empty()) out_ << "no plan yet: `plan` asks the planner (or write one now)\n";
    WriteFile(plan_file_, plan_);
    if (OpenInEditor(plan_file_)) {
      plan_ = ReadFile(plan_file_);
      out_ << "plan updated; `implement` applies it\n";
    }
  } else if (command == "plan") {
    if (!NeedsModel()) return true;
    std::string error;
    out_ << "asking the planner...\n" << std::flush;
    const std::optional<roles::Plan> plan = roles::AskPlan(*assistant_, Variables(rest), pending_, error);
    if (!plan) {
      out_ << "no usable plan: " << error << "\n";
    } else {
      plan_ = plan->text;
      out_ << "\n" << plan_ << "\n\n`plan edit` to change it, `implement` to apply it\n";
    }
  } else if (command == "implement") {
    if (!NeedsModel()) return true;
    if (plan_.empty()) out_ << "(no plan: the implementer works from the note alone)\n";
    if (auto action = AskForEdit(Role::kImplementer, Variables(rest))) Step(*action, "implementer");
  } else if (command == "debug") {
    if (!NeedsModel()) return true;
    if (current_.status == record::obs::kStatusOk) {
      out_ << "the latest kernel passed: nothing to debug\n";
      return true;
    }
    roles::Variables v = Variables(rest);
    v["failure"] = current_.text;
    if (auto action = AskForEdit(Role::kDebugger, v)) Step(*action, "debugger");
  } else if (command == "analyze" || command == "analyse") {
    if (!NeedsModel()) return true;
    std::string error;
    out_ << "asking the profiler analyst...\n" << std::flush;
    const std::optional<roles::Analysis> analysis = roles::AskAnalysis(*assistant_, Variables(rest), pending_, error);
    if (!analysis) out_ << "no usable analysis: " << error << "\n";
    else
      out_ << "\n" << analysis->bottlenecks << "\nanalyst's decision: " << roles::DecisionName(analysis->decision)
           << (analysis->reason.empty() ? "" : " - " + analysis->reason) << "\n";
  } else {
    out_ << "unknown command '" << command << "' (`help` lists them)\n";
  }
  return !over_;
}

int HitlSession::Run() {
  if (dir_.empty()) {
    out_ << "cannot create a working folder in /tmp\n";
    return 1;
  }
  task_ = env_.GetTask(options_.task);
  protocol::EnvMakeRequest make;
  make.task = options_.task;
  make.backend = options_.backend;
  make.max_steps = options_.max_steps;
  make.record = options_.record;
  env_id_ = env_.Make(make).env;
  out_ << "kernelgym hitl: " << options_.task << " on " << options_.backend << " (env " << env_id_ << ")"
       << (assistant_ ? ", model " + options_.model : ", no model") << "; your kernel is " << working_.string()
       << "\n`help` lists the commands.\nevaluating the starter...\n"
       << std::flush;
  current_ = env_.Reset(env_id_, options_.seed).observation;
  best_speedup_ = current_.best_speedup;
  WriteFile(working_, current_.source);
  Show(current_);
  for (std::string line; out_ << kPrompt << std::flush, std::getline(in_, line);) {
    try {
      if (!Execute(line)) break;
    } catch (const client::ServerError& e) {
      out_ << "the server refused: " << e.what() << "\n";
    }
  }
  if (!over_) out_ << "\nleaving without submitting\n";
  try {
    env_.Close(env_id_);
  } catch (const std::exception&) {
    // The episode is over either way; a server that went away has nothing left to close.
  }
  out_ << (submitted_ok_ ? "submitted: " + Fixed(current_.speedup) + "x the reference\n" : "") << std::flush;
  return submitted_ok_ ? 0 : 1;
}

}  // namespace kernelgym::hitl
