#include "policies/common/paid_speedup.h"

namespace kernelgym::policies {

double PaidSpeedup(const protocol::Observation& o, const nlohmann::json& info, std::string& kind) {
  if (o.status != "ok") return 0;
  const std::string paid = info.is_object() ? info.value("speedup_kind", "") : "";
  if (paid == "estimated") {
    kind = paid;
    return info.value("estimated_speedup", 0.0);
  }
  if (o.speedup > 0) kind = "measured";
  return o.speedup;
}

}  // namespace kernelgym::policies
