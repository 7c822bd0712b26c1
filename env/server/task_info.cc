#include "env/server/task_info.h"

#include <fstream>

namespace kernelgym::server {

nlohmann::json TaskSummary(const Task& task) {
  return {{"id", task.id},         {"suite", task.Suite()}, {"category", task.category},
          {"description", task.description}, {"signature", task.signature}, {"flops", task.flops},
          {"bytes", task.bytes},   {"threads", task.threads}};
}

nlohmann::json TaskDetails(const Task& task) {
  nlohmann::json details = TaskSummary(task);
  std::ifstream in(task.dir / "task.json");
  details["spec"] = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  details["starter_source"] = task.starter_source;
  details["reference_source"] = task.reference_source;
  return details;
}

}  // namespace kernelgym::server
