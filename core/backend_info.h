// What the rest of kernelgym knows of a backend, so that nothing outside a backend compares its
// name: the language of its kernels and the fence tags a model may use for them (prompts, reply
// parsing, exports), the file a person edits (hitl), where a task keeps the backend's own files
// (the task loader), and what it can do (source mutations, timing on this host).
// Each backend describes itself in its own folder (tpu_runner/<backend>/descriptor.json); the
// build compiles those files into this layer (core/CMakeLists.txt), because the clients
// (policies, the dataset export) and the task loader sit above it and below nothing of the
// runner. No code here names a backend. The server sends the descriptors in `hello`
// (docs/protocol.md), so a client of a remote server reads them there.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kernelgym {

struct BackendInfo {
  std::string name;                     // as registered: "cpu", "pallas"
  std::string language;                 // the fence tag its sources are written with: "cpp", "python"
  std::vector<std::string> fence_tags;  // tags a model's block of its source may carry; "" = untagged
  std::string source_file;              // the file its kernel is edited in: "kernel.cpp", "kernel.py"
  std::string task_folder;              // the subfolder of a task with this backend's own files; "" = none
  // How its version of a task is loaded (datasets/variants.h): "root" (task.json's own C++
  // version), "folder" (<task>/<task_folder>/ with <task_folder>.json, reference.py, starter.py),
  // "none" (no tasks in this build).
  std::string task_loader;
  std::vector<std::string> task_layouts;   // foreign task layouts it loads: "jaxbench"
  std::string description;              // one line, for listings
  std::vector<std::string> needs;          // what a host running it needs, for people
  std::vector<std::string> result_fields;  // the result record's fields it fills (docs/results.md)
  bool quotes_torch_reference = false;  // prompts quote task.json's TorchScript reference as its reference
  bool source_mutations = false;        // the search's mutate proposer (C++ rewrites) applies
  bool times_on_any_host = false;       // `tasks --measure` can time its starters on this host
  bool evaluated_by_server = false;     // the server answers its steps itself, with no runner (null)
  bool operator==(const BackendInfo&) const = default;
};

// The backends this build knows, in their descriptors' order (the default first).
const std::vector<BackendInfo>& KnownBackends();
// nullptr for a name no descriptor has.
const BackendInfo* FindBackendInfo(std::string_view name);
// The descriptor of `name`, or the cpu backend's when there is none (a record or a reply from a
// newer server: C++ is what an unknown backend's text is most likely to be).
const BackendInfo& BackendInfoOr(std::string_view name);

// The wire form (hello's `backend_info`): a map of the fields above.
nlohmann::json ToJson(const BackendInfo& info);
// ToJson's inverse: nullopt with `problem` naming the field when `json` lacks one or has it with
// another type (fields beyond these are ignored).
std::optional<BackendInfo> BackendInfoFromJson(const nlohmann::json& json, std::string& problem);

}  // namespace kernelgym
