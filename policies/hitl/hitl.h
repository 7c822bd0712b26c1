// The human-in-the-loop terminal (MaxKernel's second paradigm) as a client of the environment: a
// person drives the episode with short commands, sees every observation as Markdown, edits the
// kernel in $EDITOR, and calls on the LLM roles when a model is configured — the planner (whose
// plan they can edit before it is implemented), the implementer, the debugger and the profiler
// analyst. Without a model the person is the implementer.
//
// Commands (`help` prints this list):
//   show | source | history | plan [NOTE] | plan edit | implement [NOTE] | edit | run |
//   knobs A=1,B=x | analyze | debug [NOTE] | revert N | submit | quit
#pragma once

#include <filesystem>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "env/client/client.h"
#include "policies/roles/assistant.h"

namespace kernelgym::hitl {

struct HitlOptions {
  std::string task;
  std::string backend = "cpu";
  int max_steps = 50;
  bool record = true;
  std::optional<uint64_t> seed;
  std::string editor;  // the command that opens a file; empty: $VISUAL, $EDITOR, then vi
  std::string model;   // for the record only
};

class HitlSession {
 public:
  // `assistant` may be null: no model configured. The session reads commands from `in` until
  // `quit`, `submit` or end of input, writing everything to `out`.
  HitlSession(client::Client& env, roles::Assistant* assistant, HitlOptions options, std::istream& in,
              std::ostream& out);
  ~HitlSession();

  // Returns 0 after a submit whose kernel passed, 1 otherwise (quit, end of input, failed submit).
  int Run();

 private:
  bool Execute(const std::string& line);  // false: the session ends
  void Show(const protocol::Observation& o) const;
  void Step(const protocol::Action& action, const std::string& actor);
  bool NeedsModel() const;
  bool OpenInEditor(const std::filesystem::path& file);
  roles::Variables Variables(const std::string& note) const;
  std::optional<protocol::Action> AskForEdit(roles::Role role, const roles::Variables& v);
  void Help() const;

  client::Client& env_;
  roles::Assistant* assistant_;
  HitlOptions options_;
  std::istream& in_;
  std::ostream& out_;
  protocol::TaskInfo task_;
  std::string env_id_;
  protocol::Observation current_;
  double best_speedup_ = 0;
  std::string plan_;
  std::vector<std::string> history_;
  std::vector<roles::Exchange> pending_;
  std::filesystem::path dir_, working_, plan_file_;
  bool submitted_ok_ = false, over_ = false;
};

}  // namespace kernelgym::hitl
