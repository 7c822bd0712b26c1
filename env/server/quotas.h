// Per-client quotas (docs/server.md, "Quotas"): open envs, evaluations in flight, and runner
// seconds of evaluation per minute. A request over a quota is answered OVERLOADED with the quota
// named and a retry_after_s; other clients' requests are untouched, so one client cannot take the
// runners from the rest.
//
// A client is its CURVE key's name when the server uses CURVE (every connection with that key
// shares the quota), else its connection (a plaintext loopback client that reconnects starts
// afresh; loopback is the quick start, not a shared deployment: docs/security.md).
// Owned and used by the event loop thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace kernelgym::server {

struct QuotaOptions {
  std::size_t max_sessions = 0;     // open envs per client; 0: no limit
  std::size_t max_in_flight = 0;    // resets and steps being evaluated per client; 0: no limit
  double eval_seconds_per_minute = 0;  // runner seconds of a client's evaluations in any 60 s; 0: no limit
};

struct QuotaRefusal {
  std::string quota;  // "sessions", "in_flight", "eval_seconds"
  std::string message;
  double retry_after_s = 1;
};

class ClientQuotas {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ClientQuotas(QuotaOptions options) : options_(options) {}

  std::optional<QuotaRefusal> AdmitSession(const std::string& client) const;
  void SessionOpened(const std::string& client) { ++usage_[client].sessions; }
  void SessionClosed(const std::string& client);

  std::optional<QuotaRefusal> AdmitEvaluation(const std::string& client, Clock::time_point now);
  void EvaluationStarted(const std::string& client) { ++usage_[client].in_flight; }
  // `seconds`: what the evaluation cost its runner.
  void EvaluationFinished(const std::string& client, double seconds, Clock::time_point now);

  nlohmann::json Stats() const;  // the limits and, per client, its usage (`stats` op)

 private:
  struct Usage {
    std::size_t sessions = 0, in_flight = 0;
    std::deque<std::pair<Clock::time_point, double>> recent;  // finished evaluations of the last minute
    uint64_t refused = 0;
  };
  double RecentSeconds(Usage& usage, Clock::time_point now) const;
  void Forget(const std::string& client);  // a client with nothing left is dropped (no growth)

  QuotaOptions options_;
  std::map<std::string, Usage> usage_;
};

}  // namespace kernelgym::server
