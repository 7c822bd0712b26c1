// The autonomous agent (MaxKernel's first paradigm) as a client of the environment:
//
//   reset ──> plan ──> implement ──> step ──ok──> keep if faster ──> analyse ──> plan ...
//                                      │                    (else revert to the best)
//                                      └─fail─> debug ──> step  (up to debug_attempts, knowing
//                                                                the fixes that already failed)
//   analyst says TUNE ──> tuner's search space, each point one step
//   stop: the analyst says STOP, `patience` rounds without a gain (a tuner gain counts), the
//   round/step/time budget, or the model endpoint becoming unusable (Assistant::unusable(): a
//   refusal no retry fixes, a spent token or cost budget, calls in a row with no reply)
//   end: revert to the best kernel if it is not current, then submit it
//
// The time budget also bounds the chat calls themselves (the client's deadline), so a slow reply
// cannot overrun it by more than the env step in flight.
//
// Every chat exchange goes with the next env.step as its `meta` (recorded with the transition
// when the env records) and, when a transcript stream is given, to it as JSON lines.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

#include "env/client/client.h"
#include "policies/roles/assistant.h"
#include "policies/roles/reply_parsers.h"

namespace kernelgym::agent {

struct AgentOptions {
  std::string task;
  std::string backend = "cpu";
  std::string reward = "log_speedup_gain";
  int max_steps = 24;          // the episode's step budget (env.make max_steps), submit included
  double time_budget_s = 1800; // wall clock for the whole run; checked before each call and step
  int rounds = 8;              // plan -> implement rounds at most
  int debug_attempts = 3;      // debugger steps per failing implementation
  int patience = 3;            // rounds in a row without a new best before stopping
  int tuner_evaluations = 6;   // steps the tuner's search space may use
  bool record = true;          // the env records to the server's trajectory store
  std::optional<uint64_t> seed;
  std::string model;           // for the record only
};

struct AgentReport {
  std::string env, task, backend;
  std::string stop_reason;
  // The model endpoint could not be used (refused for good, or never a usable reply): why. A run
  // that ends so failed, whatever it submitted.
  std::string model_failure;
  double starter_speedup = 0, best_speedup = 0;  // 0: not correct
  int64_t best_step = 0;
  std::string best_source;
  int steps = 0, rounds = 0, debug_steps = 0, tuner_steps = 0;
  bool submitted = false;
  std::string submit_status;
  double submit_speedup = 0;
  roles::AskStats asks;
  llm::ChatTotals chat;
  double seconds = 0;
  nlohmann::json ToJson() const;
};

class Agent {
 public:
  // `log` gets one line per decision (human-readable progress); `transcript`, when set, every
  // exchange and step as JSON lines.
  Agent(client::Client& env, roles::Assistant& assistant, AgentOptions options, std::ostream& log,
        std::ostream* transcript = nullptr);

  // Runs one episode. Throws only what the env client throws (transport or server errors);
  // everything a model does wrong is handled inside and counted.
  AgentReport Run();

 private:
  struct Kernel {
    int64_t step = 0;
    double speedup = 0;  // 0 when not correct
    std::string source, text, status;
  };

  protocol::StepResult Step(const protocol::Action& action, const std::string& phase);
  void Observe(const protocol::Observation& o, const std::string& phase);
  bool BudgetLeft(int steps_needed, std::string& why) const;
  roles::Variables BaseVariables() const;
  std::optional<roles::Plan> AskPlan();
  std::optional<protocol::Action> Implement(const roles::Plan& plan);
  void Debug(const roles::Plan& plan);
  std::optional<roles::Analysis> Analyse();
  void Tune(const roles::Analysis& analysis);
  void RevertToBest();
  void Log(const std::string& line);

  client::Client& env_;
  roles::Assistant& assistant_;
  AgentOptions options_;
  std::ostream& log_;
  std::ostream* transcript_;

  protocol::TaskInfo task_;                  // tasks.get
  std::string env_id_;
  protocol::Observation current_;            // the latest observation
  Kernel best_;
  std::vector<std::string> history_;         // one line per round, for the planner and analyst
  std::string last_analysis_;
  std::vector<roles::Exchange> pending_;     // exchanges not yet sent with a step
  AgentReport report_;
  std::chrono::steady_clock::time_point started_;
  int round_ = 0;
  bool tuned_ = false;
  bool over_ = false;  // the server ended the episode (its step or time budget ran out)
};

}  // namespace kernelgym::agent
