#include "env/server/task_info.h"

#include <fstream>
#include <iterator>

#include "core/backend_info.h"

namespace kernelgym::server {

namespace {

// The backends a task has a version for: its root (the C++ version) serves every runner backend
// without a task folder of its own (cpu; the server's null needs no version), a subfolder serves
// its own backend.
std::vector<std::string> Backends(const Task& task) {
  std::vector<std::string> out;
  for (const BackendInfo& info : KnownBackends())
    if (info.task_folder.empty() && !info.evaluated_by_server && task.has_cpu_version) out.push_back(info.name);
  for (const auto& [name, variant] : task.variants) out.push_back(name);
  return out;
}

}  // namespace

nlohmann::json TaskSummary(const Task& task) {
  return {{"id", task.id},         {"suite", task.Suite()}, {"category", task.category},
          {"description", task.description}, {"signature", task.signature}, {"flops", task.flops},
          {"bytes", task.bytes},   {"threads", task.threads}, {"backends", Backends(task)}};
}

nlohmann::json TaskDetails(const Task& task) {
  nlohmann::json details = TaskSummary(task);
  std::ifstream in(task.dir / "task.json");
  details["spec"] = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  details["starter_source"] = task.starter_source;
  details["reference_source"] = task.reference_source;
  // Per other backend: its starter, its reference and its size sets.
  nlohmann::json variants = nlohmann::json::object();
  for (const auto& [name, variant] : task.variants) {
    nlohmann::json sets = nlohmann::json::object();
    for (const auto& [set_name, sizes] : variant.size_sets) {
      nlohmann::json set = nlohmann::json::object();
      for (const SizeParam& s : sizes) set[s.name] = s.value;
      sets[set_name] = set;
    }
    std::ifstream reference(variant.dir / (variant.layout == "jaxbench" ? "baseline.py" : "reference.py"));
    std::string reference_text((std::istreambuf_iterator<char>(reference)), std::istreambuf_iterator<char>());
    variants[name] = {{"layout", variant.layout}, {"starter_source", variant.starter_source},
                      {"reference_source", reference_text}, {"size_sets", sets}};
  }
  details["variants"] = variants;
  return details;
}

}  // namespace kernelgym::server
