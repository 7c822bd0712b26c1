#include "datasets/variants.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/backend_info.h"
#include "core/digest.h"

namespace kernelgym {
namespace {

using nlohmann::json;

std::optional<std::string> ReadText(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Where a JAXBench case has no starter: a kernel that says what to write. It has no pallas_call,
// so evaluating it is an honest `rejected`, never a score.
std::string JaxBenchStub(const std::string& case_id) {
  return "# " + case_id +
         ": write `kernel(*inputs)` with jax.experimental.pallas.pallas_call; it receives what\n"
         "# the case's create_inputs() returns and must return what its workload() returns.\n"
         "import jax\n"
         "import jax.numpy as jnp\n"
         "from jax.experimental import pallas as pl\n\n\n"
         "def kernel(*inputs):\n"
         "    raise NotImplementedError(\"write a Pallas kernel\")\n";
}

// <task_folder>.json's "inputs"/"outputs": name -> {"dtype", ...}. Only the dtype is the registry's to
// know (listings); the judge reads the rest (initializers, tolerances) and refuses what is wrong.
std::string ReadDTypes(const json& config, const char* kind, const std::vector<TensorSpec>& tensors,
                       const std::vector<std::string>& allowed, const std::string& file, BackendVariant& variant) {
  if (!config.contains(kind)) return "";
  const std::string field = kind;
  if (!config[kind].is_object()) return file + ": " + field + ": must be an object (tensor name -> overrides)";
  for (const auto& [name, override_entry] : config[kind].items()) {
    const std::string& tensor = name;  // clang 14 cannot capture a structured binding
    const bool known = std::any_of(tensors.begin(), tensors.end(), [&](const TensorSpec& t) { return t.name == tensor; });
    if (!known) return file + ": " + field + "." + name + ": not one of the task's " + field;
    if (!override_entry.is_object()) return file + ": " + field + "." + name + ": must be an object";
    if (!override_entry.contains("dtype")) continue;
    const json& dtype = override_entry["dtype"];
    if (!dtype.is_string() || std::find(allowed.begin(), allowed.end(), dtype.get<std::string>()) == allowed.end()) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return file + ": " + field + "." + name + ".dtype: must be one of " + list;
    }
    variant.dtypes[name] = dtype.get<std::string>();
  }
  return "";
}

}  // namespace

const std::vector<std::string>& FolderVariantInputDTypes() {
  static const std::vector<std::string> names{"float32", "bfloat16", "float16", "int8", "uint8", "int32"};
  return names;
}

const std::vector<std::string>& FolderVariantOutputDTypes() {
  static const std::vector<std::string> names{"float32", "bfloat16", "float16", "int32"};
  return names;
}

std::string BackendVariant::DTypeOf(const TensorSpec& tensor) const {
  auto it = dtypes.find(tensor.name);
  return it != dtypes.end() ? it->second : std::string(DTypeName(tensor.dtype));
}

bool IsVariantBackend(std::string_view backend) {
  const BackendInfo* info = FindBackendInfo(backend);
  return info && !info->task_folder.empty();
}

namespace {

// The backend that loads the JAXBench layout, by its descriptor (task_layouts); nullptr: none.
const BackendInfo* JaxBenchBackend() {
  for (const BackendInfo& info : KnownBackends())
    if (std::find(info.task_layouts.begin(), info.task_layouts.end(), "jaxbench") != info.task_layouts.end())
      return &info;
  return nullptr;
}

// One backend's version of the task, from its folder (its descriptor's task_loader "folder").
std::string LoadFolderVariant(Task& task, const BackendInfo& backend) {
  const std::filesystem::path dir = task.dir / backend.task_folder;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return "";
  const std::filesystem::path config_file = dir / (backend.task_folder + ".json");
  const auto config_text = ReadText(config_file);
  if (!config_text) return config_file.string() + ": cannot be read";
  json config;
  try {
    config = json::parse(*config_text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number past a double's range
    return config_file.string() + ": not valid JSON: " + e.what();
  }
  BackendVariant variant;
  variant.dir = dir;
  std::vector<std::string> names;
  for (const SizeParam& s : task.sizes) names.push_back(s.name);
  std::sort(names.begin(), names.end());
  for (const char* set_name : {"small", "check", "full"}) {
    const std::string field = std::string("sizes.") + set_name;
    if (!config.contains("sizes") || !config["sizes"].is_object() || !config["sizes"].contains(set_name) ||
        !config["sizes"][set_name].is_object())
      return config_file.string() + ": " + field + ": is required (an object: size name -> value)";
    std::vector<SizeParam> sizes;
    std::vector<std::string> given;
    for (const auto& [name, value] : config["sizes"][set_name].items()) {
      if (!value.is_number_integer() || value.get<int64_t>() <= 0)
        return config_file.string() + ": " + field + "." + name + ": must be a positive integer";
      sizes.push_back({name, value.get<int64_t>()});
      given.push_back(name);
    }
    std::sort(given.begin(), given.end());
    if (given != names) return config_file.string() + ": " + field + ": must give exactly the task's sizes";
    // task.json's order, so listings read the same for every set
    std::sort(sizes.begin(), sizes.end(), [&](const SizeParam& a, const SizeParam& b) {
      auto pos = [&](const std::string& n) {
        return std::find_if(task.sizes.begin(), task.sizes.end(), [&](const SizeParam& s) { return s.name == n; });
      };
      return pos(a.name) < pos(b.name);
    });
    variant.size_sets.emplace_back(set_name, std::move(sizes));
  }
  if (std::string e = ReadDTypes(config, "inputs", task.inputs, FolderVariantInputDTypes(), config_file.string(), variant);
      !e.empty())
    return e;
  if (std::string e = ReadDTypes(config, "outputs", task.outputs, FolderVariantOutputDTypes(), config_file.string(), variant);
      !e.empty())
    return e;
  if (!ReadText(dir / "reference.py")) return (dir / "reference.py").string() + ": cannot be read";
  auto starter = ReadText(dir / "starter.py");
  if (!starter) return (dir / "starter.py").string() + ": cannot be read";
  variant.starter_source = std::move(*starter);
  if (std::string e = LoadKnobTemplate(config, dir, task, KnobLanguage::kPython, variant.knobs, variant.template_source);
      !e.empty())
    return config_file.string() + ": " + e;
  task.variants[backend.name] = std::move(variant);
  return "";
}

}  // namespace

std::string LoadVariants(Task& task) {
  for (const BackendInfo& backend : KnownBackends())
    if (backend.task_loader == "folder" && !backend.task_folder.empty())
      if (std::string problem = LoadFolderVariant(task, backend); !problem.empty()) return problem;
  return "";
}

JaxBenchLoad LoadJaxBenchLayout(const std::filesystem::path& benchmark_dir, const std::string& suite) {
  JaxBenchLoad out;
  const BackendInfo* backend = JaxBenchBackend();
  if (!backend) {
    out.errors.push_back(benchmark_dir.string() + ": no backend of this build loads the JAXBench layout");
    return out;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(benchmark_dir, ec)) {
    out.errors.push_back(benchmark_dir.string() + ": not a folder");
    return out;
  }
  std::vector<std::filesystem::path> cases;
  for (const auto& entry : std::filesystem::directory_iterator(benchmark_dir, ec))
    if (entry.is_directory() && std::filesystem::exists(entry.path() / "baseline.py")) cases.push_back(entry.path());
  std::sort(cases.begin(), cases.end());
  for (const auto& case_dir : cases) {
    const auto baseline = ReadText(case_dir / "baseline.py");
    if (!baseline) {
      out.errors.push_back((case_dir / "baseline.py").string() + ": cannot be read");
      continue;
    }
    std::string missing;
    for (const char* name : {"CONFIG", "def create_inputs", "def workload"})
      if (baseline->find(name) == std::string::npos) missing += missing.empty() ? name : std::string(", ") + name;
    if (!missing.empty()) {
      out.errors.push_back((case_dir / "baseline.py").string() + ": lacks " + missing + " (the JAXBench layout)");
      continue;
    }
    Task task;
    task.id = suite + "/" + case_dir.filename().string();
    task.category = "jaxbench";
    task.description = "JAXBench case " + case_dir.filename().string() + " (" + (case_dir / "baseline.py").string() +
                       "): its workload() is the reference, its create_inputs() the inputs.";
    task.dir = case_dir;
    task.digest = TaskFolderDigest(case_dir);
    task.has_cpu_version = false;
    BackendVariant variant;
    variant.dir = case_dir;
    variant.layout = "jaxbench";
    const auto starter = ReadText(case_dir / "starter.py");
    variant.starter_source = starter ? *starter : JaxBenchStub(task.id);
    task.variants[backend->name] = std::move(variant);
    out.tasks.push_back(std::move(task));
  }
  return out;
}

}  // namespace kernelgym
