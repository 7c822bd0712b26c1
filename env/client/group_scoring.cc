#include "env/client/group_scoring.h"

#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <utility>

#include "env/client/errors.h"

namespace kernelgym::client {
namespace {

struct Slot {
  std::size_t group = 0, candidate = 0;
  bool step = false;  // false: the fork's reply
};

// Closes the forks, pipelined; one already gone is not an error here.
void CloseForks(Client& client, const std::vector<std::string>& forks, double timeout_s) {
  std::size_t waiting = 0;
  for (const std::string& env : forks) {
    client.Send(protocol::EnvCloseRequest{env});
    ++waiting;
  }
  while (waiting > 0 && client.Recv(timeout_s)) --waiting;
}

}  // namespace

std::vector<std::vector<protocol::StepResult>> ScoreGroups(Client& client, const std::vector<ScoreGroup>& groups,
                                                           double timeout_s) {
  if (client.outstanding() > 0) {
    throw std::invalid_argument("ScoreGroups: receive the replies to your own Send() calls first");
  }
  std::vector<std::vector<std::optional<protocol::StepResult>>> results(groups.size());
  std::map<uint64_t, Slot> pending;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    results[g].resize(groups[g].candidates.size());
    for (std::size_t i = 0; i < groups[g].candidates.size(); ++i)
      pending[client.Send(protocol::EnvForkRequest{groups[g].env})] = {g, i, false};
  }
  std::vector<std::string> forks;
  std::optional<ServerError> failure;
  try {
    while (!pending.empty()) {
      std::optional<Reply> reply = client.Recv(timeout_s);
      if (!reply) throw TransportError("ScoreGroups: no reply within " + std::to_string(timeout_s) + " s");
      const auto it = pending.find(reply->id);
      if (it == pending.end()) continue;  // cannot happen: nothing else is outstanding
      const Slot slot = it->second;
      pending.erase(it);
      try {
        if (!slot.step) {
          const std::string fork = AsEnvInfo(*reply).env;
          forks.push_back(fork);
          // Once something failed, no more evaluations are started.
          if (!failure) {
            const protocol::Action& action = groups[slot.group].candidates[slot.candidate];
            pending[client.Send(protocol::EnvStepRequest{fork, action, nlohmann::json::object()})] = {slot.group,
                                                                                                      slot.candidate, true};
          }
        } else {
          results[slot.group][slot.candidate] = AsStepResult(*reply);
        }
      } catch (const ServerError& e) {
        if (!failure) failure = e;
      }
    }
  } catch (...) {
    CloseForks(client, forks, timeout_s);
    throw;
  }
  CloseForks(client, forks, timeout_s);
  if (failure) throw *failure;
  std::vector<std::vector<protocol::StepResult>> out(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (std::optional<protocol::StepResult>& r : results[g]) out[g].push_back(std::move(*r));
  return out;
}

std::vector<double> GroupRelativeAdvantages(const std::vector<double>& rewards) {
  if (rewards.empty()) return {};
  const double n = static_cast<double>(rewards.size());
  const double mean = std::accumulate(rewards.begin(), rewards.end(), 0.0) / n;
  double variance = 0;
  for (double r : rewards) variance += (r - mean) * (r - mean);
  const double std_dev = std::sqrt(variance / n);
  std::vector<double> out;
  for (double r : rewards) out.push_back(std_dev < 1e-12 ? 0.0 : (r - mean) / std_dev);
  return out;
}

}  // namespace kernelgym::client
