#include "core/backend_info.h"

namespace kernelgym {

const std::vector<BackendInfo>& KnownBackends() {
  static const std::vector<BackendInfo> backends = [] {
    std::vector<BackendInfo> v;
    BackendInfo cpu;
    cpu.name = "cpu";
    cpu.language = "cpp";
    cpu.fence_tags = {"cpp", "c++", "cxx", "c", "cc", ""};
    cpu.source_file = "kernel.cpp";
    cpu.description = "C++ kernels compiled on the runner's host, timed against the task's libtorch reference";
    cpu.quotes_torch_reference = true;
    cpu.source_mutations = true;
    cpu.times_on_any_host = true;
    v.push_back(cpu);

    BackendInfo pallas;
    pallas.name = "pallas";
    pallas.language = "python";
    pallas.fence_tags = {"python", "py", "python3", ""};
    pallas.source_file = "kernel.py";
    pallas.task_folder = "pallas";
    pallas.description = "JAX Pallas TPU kernels: a deviceless TPU compile, interpret-mode correctness, "
                         "an estimated TPU speed; measured on a TPU host";
    v.push_back(pallas);

    BackendInfo cuda;
    cuda.name = "cuda";
    cuda.language = "cuda";
    cuda.fence_tags = {"cuda", "cu", "cpp", "c++", ""};
    cuda.source_file = "kernel.cu";
    cuda.task_folder = "cuda";
    cuda.description = "CUDA C++ kernels (planned: no runner in this build)";
    v.push_back(cuda);

    BackendInfo null;
    null.name = "null";
    null.language = "cpp";
    null.fence_tags = cpu.fence_tags;
    null.source_file = "kernel.cpp";
    null.description = "answered by the server itself with a fixed result: for measuring the server";
    null.evaluated_by_server = true;
    v.push_back(null);
    return v;
  }();
  return backends;
}

const BackendInfo* FindBackendInfo(std::string_view name) {
  for (const BackendInfo& info : KnownBackends())
    if (info.name == name) return &info;
  return nullptr;
}

const BackendInfo& BackendInfoOr(std::string_view name) {
  const BackendInfo* info = FindBackendInfo(name);
  return info ? *info : KnownBackends().front();
}

std::optional<BackendInfo> BackendInfoFromJson(const nlohmann::json& json, std::string& problem) {
  if (!json.is_object()) {
    problem = "a backend descriptor must be a map";
    return std::nullopt;
  }
  BackendInfo info;
  auto field = [&](const char* key, auto& out) {
    using T = std::decay_t<decltype(out)>;
    const auto it = json.find(key);
    bool ok = it != json.end();
    if (ok) {
      if constexpr (std::is_same_v<T, bool>) ok = it->is_boolean();
      else if constexpr (std::is_same_v<T, std::string>) ok = it->is_string();
      else {
        ok = it->is_array();
        for (std::size_t i = 0; ok && i < it->size(); ++i) ok = (*it)[i].is_string();
      }
    }
    if (ok) out = it->template get<T>();
    else if (problem.empty()) problem = std::string("field '") + key + "' is missing or not of its type";
  };
  field("name", info.name);
  field("language", info.language);
  field("fence_tags", info.fence_tags);
  field("source_file", info.source_file);
  field("task_folder", info.task_folder);
  field("description", info.description);
  field("quotes_torch_reference", info.quotes_torch_reference);
  field("source_mutations", info.source_mutations);
  field("times_on_any_host", info.times_on_any_host);
  field("evaluated_by_server", info.evaluated_by_server);
  if (!problem.empty()) return std::nullopt;
  return info;
}

nlohmann::json ToJson(const BackendInfo& info) {
  return {{"name", info.name},
          {"language", info.language},
          {"fence_tags", info.fence_tags},
          {"source_file", info.source_file},
          {"task_folder", info.task_folder},
          {"description", info.description},
          {"quotes_torch_reference", info.quotes_torch_reference},
          {"source_mutations", info.source_mutations},
          {"times_on_any_host", info.times_on_any_host},
          {"evaluated_by_server", info.evaluated_by_server}};
}

}  // namespace kernelgym
