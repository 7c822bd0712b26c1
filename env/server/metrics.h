// The server's counters in the Prometheus text exposition format (version 0.0.4), for scrapers
// and Kubernetes autoscaling (docs/deploy.md, "Metrics"). Rendered from the `stats` tree, so the
// two never disagree; served over plain HTTP by the event loop (serve --metrics-bind).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kernelgym::server {

// `stats`: what ServerLoop::Stats() returns. Every metric is prefixed kernelgym_; label values
// are escaped as the format requires.
std::string PrometheusText(const nlohmann::json& stats);

// The HTTP response carrying `body` (200, text/plain; version=0.0.4, Connection: close); a
// request that is not a GET of /metrics gets 404.
std::string HttpResponse(std::string_view request, const std::string& body);

}  // namespace kernelgym::server
