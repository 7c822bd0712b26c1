// Group scoring: G candidate actions from one env's state, scored in one pass (GRPO-style
// training). Each candidate is stepped in a fork of the env (a fork copies the episode; nothing is
// evaluated), every fork and step pipelined on the client, the forks closed at the end; the env
// itself is not stepped, so its starter (evaluated at reset) is never evaluated again. The Python
// client's KernelGymEnv.score / kernelgym.score_groups do the same (python/kernelgym/group.py).
#pragma once

#include <string>
#include <vector>

#include "env/client/client.h"
#include "env/protocol/messages.h"

namespace kernelgym::client {

struct ScoreGroup {
  std::string env;                        // a reset env; not stepped
  std::vector<protocol::Action> candidates;
};

// Per group, one StepResult per candidate, in order. Throws the ServerError of a fork or step the
// server refused (after closing the forks made), TransportError when no reply comes for
// `timeout_s`, std::invalid_argument when the client has sends of its own outstanding (their
// replies would be taken).
std::vector<std::vector<protocol::StepResult>> ScoreGroups(Client& client, const std::vector<ScoreGroup>& groups,
                                                           double timeout_s = 600);
inline std::vector<protocol::StepResult> Score(Client& client, const std::string& env,
                                               const std::vector<protocol::Action>& candidates, double timeout_s = 600) {
  return ScoreGroups(client, {{env, candidates}}, timeout_s).front();
}

// GRPO's advantage: each reward less the group's mean, over its (population) standard deviation;
// all 0 when the rewards are equal. Use a reward strictly monotone in speed (log_speedup).
std::vector<double> GroupRelativeAdvantages(const std::vector<double>& rewards);

}  // namespace kernelgym::client
