#include "core/backend_info.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/builtin_backend_descriptors.h"

namespace kernelgym {

const std::vector<BackendInfo>& KnownBackends() {
  static const std::vector<BackendInfo> backends = [] {
    std::vector<std::pair<int64_t, BackendInfo>> ordered;
    for (int i = 0; i < kBuiltinBackendDescriptorCount; ++i) {
      const char* text = kBuiltinBackendDescriptors[i];
      // The descriptors are the build's own files: one that does not read is a bug, said loudly.
      const nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
      std::string problem;
      std::optional<BackendInfo> info = BackendInfoFromJson(json, problem);
      const auto order = json.is_object() ? json.find("order") : json.end();
      if (!info || order == json.end() || !order->is_number_integer()) {
        std::fprintf(stderr, "kernelgym: a backend descriptor (tpu_runner/*/descriptor.json) is invalid: %s\n",
                     problem.empty() ? "no integer 'order'" : problem.c_str());
        std::abort();
      }
      ordered.emplace_back(order->get<int64_t>(), std::move(*info));
    }
    std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<BackendInfo> v;
    for (auto& [order, info] : ordered) v.push_back(std::move(info));
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
  field("task_loader", info.task_loader);
  field("task_layouts", info.task_layouts);
  field("description", info.description);
  field("needs", info.needs);
  field("result_fields", info.result_fields);
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
          {"task_loader", info.task_loader},
          {"task_layouts", info.task_layouts},
          {"description", info.description},
          {"needs", info.needs},
          {"result_fields", info.result_fields},
          {"quotes_torch_reference", info.quotes_torch_reference},
          {"source_mutations", info.source_mutations},
          {"times_on_any_host", info.times_on_any_host},
          {"evaluated_by_server", info.evaluated_by_server}};
}

}  // namespace kernelgym
