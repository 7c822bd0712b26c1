#include "env/server/quotas.h"

#include <algorithm>
#include <cstdio>

namespace kernelgym::server {
namespace {

constexpr std::chrono::seconds kWindow{60};

std::string Num(double x) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", x);
  return buffer;
}

}  // namespace

std::optional<QuotaRefusal> ClientQuotas::AdmitSession(const std::string& client) const {
  if (options_.max_sessions == 0) return std::nullopt;
  const auto it = usage_.find(client);
  const std::size_t open = it == usage_.end() ? 0 : it->second.sessions;
  if (open < options_.max_sessions) return std::nullopt;
  // A session frees only when closed (or reaped idle): the hint is to close one, not to wait.
  return QuotaRefusal{"sessions",
                      "this client has " + std::to_string(open) + " open envs, its quota: close one (env.close)", 5};
}

void ClientQuotas::SessionClosed(const std::string& client) {
  const auto it = usage_.find(client);
  if (it == usage_.end()) return;
  if (it->second.sessions > 0) --it->second.sessions;
  Forget(client);
}

double ClientQuotas::RecentSeconds(Usage& usage, Clock::time_point now) const {
  while (!usage.recent.empty() && now - usage.recent.front().first >= kWindow) usage.recent.pop_front();
  double sum = 0;
  for (const auto& [at, seconds] : usage.recent) sum += seconds;
  return sum;
}

std::optional<QuotaRefusal> ClientQuotas::AdmitEvaluation(const std::string& client, Clock::time_point now) {
  const auto it = usage_.find(client);
  if (it == usage_.end()) return std::nullopt;
  Usage& usage = it->second;
  if (options_.max_in_flight > 0 && usage.in_flight >= options_.max_in_flight) {
    ++usage.refused;
    return QuotaRefusal{"in_flight",
                        "this client has " + std::to_string(usage.in_flight) +
                            " evaluations in flight, its quota: wait for a reply first",
                        1};
  }
  if (options_.eval_seconds_per_minute > 0) {
    const double used = RecentSeconds(usage, now);
    if (used >= options_.eval_seconds_per_minute) {
      // When enough of the window's oldest evaluations expire to bring it under the limit.
      double left = used;
      double retry = 1;
      for (const auto& [at, seconds] : usage.recent) {
        left -= seconds;
        retry = std::chrono::duration<double>(at + kWindow - now).count();
        if (left < options_.eval_seconds_per_minute) break;
      }
      ++usage.refused;
      return QuotaRefusal{"eval_seconds",
                          "this client used " + Num(used) + " s of evaluation in the last 60 s, its quota is " +
                              Num(options_.eval_seconds_per_minute) + " s",
                          std::max(retry, 0.1)};
    }
  }
  return std::nullopt;
}

void ClientQuotas::EvaluationFinished(const std::string& client, double seconds, Clock::time_point now) {
  const auto it = usage_.find(client);
  if (it == usage_.end()) return;
  Usage& usage = it->second;
  if (usage.in_flight > 0) --usage.in_flight;
  if (options_.eval_seconds_per_minute > 0 && seconds > 0) usage.recent.emplace_back(now, seconds);
  RecentSeconds(usage, now);
  Forget(client);
}

void ClientQuotas::Forget(const std::string& client) {
  const auto it = usage_.find(client);
  if (it != usage_.end() && it->second.sessions == 0 && it->second.in_flight == 0 && it->second.recent.empty())
    usage_.erase(it);
}

nlohmann::json ClientQuotas::Stats() const {
  nlohmann::json clients = nlohmann::json::object();
  for (const auto& [client, usage] : usage_) {
    double recent = 0;
    for (const auto& [at, seconds] : usage.recent) recent += seconds;
    // Plaintext clients are named by their connection's routing id: bytes, shown as hex.
    std::string name;
    for (unsigned char c : client) {
      if (std::isprint(c)) {
        name += static_cast<char>(c);
      } else {
        char hex[5];
        std::snprintf(hex, sizeof hex, "\\x%02x", c);
        name += hex;
      }
    }
    clients[name] = {{"sessions", usage.sessions}, {"in_flight", usage.in_flight},
                     {"eval_seconds_last_minute", recent}, {"refused", usage.refused}};
  }
  return {{"max_sessions", options_.max_sessions},
          {"max_in_flight", options_.max_in_flight},
          {"eval_seconds_per_minute", options_.eval_seconds_per_minute},
          {"clients", clients}};
}

}  // namespace kernelgym::server
