#include "env/server/metrics.h"

#include <cmath>
#include <sstream>

namespace kernelgym::server {
namespace {

using nlohmann::json;

std::string Escaped(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string Number(const json& value) {
  if (value.is_number_unsigned()) return std::to_string(value.get<uint64_t>());
  if (value.is_number_integer()) return std::to_string(value.get<int64_t>());
  if (value.is_boolean()) return value.get<bool>() ? "1" : "0";
  if (!value.is_number()) return "NaN";
  std::ostringstream out;
  out.precision(17);
  out << value.get<double>();
  return out.str();
}

class Writer {
 public:
  // One metric family: its HELP and TYPE lines, once.
  void Family(const std::string& name, const char* type, const std::string& help) {
    out_ << "# HELP kernelgym_" << name << " " << help << "\n# TYPE kernelgym_" << name << " " << type << "\n";
  }
  void Sample(const std::string& name, const json& value, const std::string& label = "",
              const std::string& label_value = "") {
    out_ << "kernelgym_" << name;
    if (!label.empty()) out_ << "{" << label << "=\"" << Escaped(label_value) << "\"}";
    out_ << " " << Number(value) << "\n";
  }
  // A family with one sample per key of `map` (label -> value); none when the map is empty.
  void Labelled(const std::string& name, const char* type, const std::string& help, const std::string& label,
                const json& map) {
    Family(name, type, help);
    if (!map.is_object()) return;
    for (auto it = map.begin(); it != map.end(); ++it) Sample(name, it.value(), label, it.key());
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

int64_t Int(const json& value) { return value.is_number_integer() ? value.get<int64_t>() : 0; }

const json& At(const json& tree, const char* key) {
  static const json kNull;
  if (!tree.is_object()) return kNull;
  auto it = tree.find(key);
  return it == tree.end() ? kNull : *it;
}

}  // namespace

std::string PrometheusText(const json& stats) {
  Writer w;
  const json& scheduler = At(stats, "scheduler");
  const json& memory = At(stats, "memory");
  w.Family("up", "gauge", "1 while the server answers");
  w.Sample("up", 1);
  w.Family("draining", "gauge", "1 once SIGTERM was received (no new work accepted)");
  w.Sample("draining", At(stats, "draining"));
  w.Family("uptime_seconds", "gauge", "seconds since the server started");
  w.Sample("uptime_seconds", At(stats, "uptime_s"));
  w.Family("sessions", "gauge", "open envs");
  w.Sample("sessions", At(stats, "sessions"));
  w.Family("pending_evaluations", "gauge", "resets and steps waiting for their evaluation");
  w.Sample("pending_evaluations", At(stats, "pending"));
  w.Labelled("queue_depth", "gauge", "jobs waiting for a runner, per backend", "backend", At(scheduler, "queued"));
  w.Family("running_jobs", "gauge", "jobs on a runner now");
  w.Sample("running_jobs", At(scheduler, "running"));

  // Runners and their slots per backend, from the runner list.
  json runners = json::object(), slots = json::object(), busy = json::object();
  for (const json& r : At(scheduler, "runners").is_array() ? At(scheduler, "runners") : json::array())
    for (const json& backend : At(r, "backends")) {
      const std::string b = backend.is_string() ? backend.get<std::string>() : "?";
      runners[b] = runners.value(b, 0) + 1;
      slots[b] = slots.value(b, 0) + Int(At(r, "slots"));
      busy[b] = busy.value(b, 0) + Int(At(r, "busy"));
    }
  w.Labelled("runners", "gauge", "connected runners, per backend they serve", "backend", runners);
  w.Labelled("runner_slots", "gauge", "evaluation slots of the connected runners, per backend", "backend", slots);
  w.Labelled("runner_slots_busy", "gauge", "slots evaluating a job now, per backend", "backend", busy);

  w.Labelled("jobs_total", "counter", "jobs answered, by the result's status", "status",
             At(scheduler, "completed_by_status"));
  w.Family("jobs_requeued_total", "counter", "jobs re-queued after their runner was lost");
  w.Sample("jobs_requeued_total", At(scheduler, "requeued"));
  w.Family("jobs_runner_lost_total", "counter", "jobs completed as RUNNER_LOST");
  w.Sample("jobs_runner_lost_total", At(scheduler, "lost"));
  w.Family("runners_dropped_total", "counter", "runners dropped (silent, or reconnected under a new identity)");
  w.Sample("runners_dropped_total", At(scheduler, "dropped_runners"));
  w.Labelled("stale_results_total", "counter", "runner results dropped: not the answer to a job waiting for it",
             "reason", At(scheduler, "stale_results"));

  const json& latency = At(scheduler, "job_seconds");
  w.Family("job_seconds", "histogram", "seconds from a job's submission to its result (queue wait included)");
  for (const json& bucket : At(latency, "buckets").is_array() ? At(latency, "buckets") : json::array()) {
    const json& le = At(bucket, "le");
    w.Sample("job_seconds_bucket", At(bucket, "count"), "le", le.is_string() ? le.get<std::string>() : Number(le));
  }
  w.Sample("job_seconds_sum", At(latency, "sum"));
  w.Sample("job_seconds_count", At(latency, "count"));

  w.Labelled("requests_total", "counter", "client requests, by op", "op", At(stats, "requests"));
  w.Labelled("errors_total", "counter", "error replies, by code", "code", At(stats, "errors"));
  w.Family("undeliverable_replies_total", "counter", "replies dropped for clients that did not read them");
  w.Sample("undeliverable_replies_total", At(stats, "undeliverable_replies"));
  w.Family("resident_bytes", "gauge", "the server's resident memory");
  w.Sample("resident_bytes", At(stats, "rss_bytes"));
  w.Family("heap_bytes", "gauge", "malloc's bytes in use (mallinfo2)");
  w.Sample("heap_bytes", At(memory, "heap_bytes"));
  w.Family("heap_bytes_per_session", "gauge", "heap above the start, per open env");
  w.Sample("heap_bytes_per_session", At(memory, "heap_bytes_per_session"));
  return w.str();
}

std::string HttpResponse(std::string_view request, const std::string& body) {
  const bool metrics = request.rfind("GET /metrics ", 0) == 0 || request.rfind("GET / ", 0) == 0;
  const std::string status = metrics ? "200 OK" : "404 Not Found";
  const std::string content = metrics ? body : "kernelgym: GET /metrics\n";
  return "HTTP/1.0 " + status + "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: " +
         std::to_string(content.size()) + "\r\nConnection: close\r\n\r\n" + content;
}

}  // namespace kernelgym::server
