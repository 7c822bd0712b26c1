#include "env/server/task_info.h"

#include <fstream>
#include <iterator>

#include "core/backend_info.h"

namespace kernelgym::server {

namespace {

// The backend whose version is the task's root folder (the C++ version; today cpu): the one
// without a task folder of its own that a runner evaluates (the server's null needs no version).
const BackendInfo* RootBackend() {
  for (const BackendInfo& info : KnownBackends())
    if (info.task_folder.empty() && !info.evaluated_by_server) return &info;
  return nullptr;
}

std::map<std::string, int64_t> SizeMap(const std::vector<SizeParam>& sizes) {
  std::map<std::string, int64_t> out;
  for (const SizeParam& s : sizes) out[s.name] = s.value;
  return out;
}

std::vector<protocol::TensorInfo> Tensors(const std::vector<TensorSpec>& specs, bool outputs) {
  std::vector<protocol::TensorInfo> out;
  for (const TensorSpec& spec : specs) {
    protocol::TensorInfo t;
    t.name = spec.name;
    t.dtype = std::string(DTypeName(spec.dtype));
    for (const Extent& e : spec.extents) t.dims.push_back(e.size.empty() ? std::to_string(e.literal) : e.size);
    t.shape = spec.shape;
    if (outputs) {
      t.atol = spec.tolerance.atol;
      t.rtol = spec.tolerance.rtol;
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::string ReadFile(const std::filesystem::path& file) {
  std::ifstream in(file);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

protocol::TaskSummary TaskSummaryOf(const Task& task) {
  protocol::TaskSummary s;
  s.id = task.id;
  s.suite = task.Suite();
  s.category = task.category;
  s.description = task.description;
  s.signature = task.signature;
  s.flops = task.flops;
  s.bytes = task.bytes;
  s.threads = task.threads;
  if (const BackendInfo* root = RootBackend(); root && task.has_cpu_version) s.backends.push_back(root->name);
  for (const auto& [name, variant] : task.variants) s.backends.push_back(name);
  return s;
}

namespace {

std::map<std::string, protocol::KnobDomain> KnobDomains(const std::vector<Knob>& knobs) {
  std::map<std::string, protocol::KnobDomain> out;
  auto wire = [](const Knob::Value& v) { return std::visit([](const auto& x) { return protocol::KnobValue(x); }, v); };
  for (const Knob& knob : knobs) {
    protocol::KnobDomain domain;
    for (const Knob::Value& v : knob.values) domain.values.push_back(wire(v));
    domain.default_value = wire(knob.default_value);
    out[knob.name] = std::move(domain);
  }
  return out;
}

}  // namespace

protocol::TaskInfo TaskInfoOf(const Task& task) {
  protocol::TaskInfo info;
  info.summary = TaskSummaryOf(task);
  info.sizes = SizeMap(task.sizes);
  for (const auto& sizes : task.check_sizes) info.check_sizes.push_back(SizeMap(sizes));
  info.inputs = Tensors(task.inputs, /*outputs=*/false);
  info.outputs = Tensors(task.outputs, /*outputs=*/true);
  info.atol = task.tolerance.atol;
  info.rtol = task.tolerance.rtol;
  info.knobs = KnobDomains(task.knobs);
  if (const BackendInfo* root = RootBackend(); root && task.has_cpu_version) {
    protocol::TaskVersion& v = info.versions[root->name];
    v.starter_source = task.starter_source;
    v.reference_source = task.reference_source;
    v.compile_flags = task.compile_flags;
    v.extra_allowed_headers = task.policy.extra_allowed_headers;
    v.allowed_libraries = task.policy.allowed_libraries;
  }
  for (const auto& [name, variant] : task.variants) {
    protocol::TaskVersion& v = info.versions[name];
    v.starter_source = variant.starter_source;
    v.knobs = KnobDomains(variant.knobs);
    v.reference_source = ReadFile(variant.dir / (variant.layout == "jaxbench" ? "baseline.py" : "reference.py"));
    for (const auto& [set_name, sizes] : variant.size_sets) v.size_sets[set_name] = SizeMap(sizes);
  }
  return info;
}

}  // namespace kernelgym::server
