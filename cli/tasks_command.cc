#include "cli/tasks_command.h"

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <iostream>
#include <ostream>

#include "core/backend_info.h"
#include "core/progress.h"
#include "datasets/measurements.h"
#include "tpu_runner/backend.h"
#include "tpu_runner/runner_config.h"

namespace kernelgym {
namespace {

using nlohmann::json;

// The starter evaluated now: the same figures measured.json records.
std::optional<TaskMeasurement> MeasureStarter(Backend& backend, const Task& task, double budget) {
  EvalOptions options;
  options.timing.budget_seconds = budget;
  const EvalResult r = backend.Evaluate(task, task.starter_source, options);
  if (r.status != Status::kOk || !r.timing) {
    spdlog::warn("{}: starter: {} ({})", task.id, StatusName(r.status), r.message);
    return std::nullopt;
  }
  TaskMeasurement m;
  m.reference_ms = r.timing->reference.median_ns / 1e6;
  m.starter_ms = r.timing->candidate.median_ns / 1e6;
  m.starter_speedup = r.timing->speedup;
  return m;
}

json ShapeJson(const TensorSpec& t) {
  return {{"name", t.name}, {"dtype", std::string(DTypeName(t.dtype))}, {"shape", t.shape}};
}

json TaskJson(const Task& t, const TaskMeasurement* m) {
  json sizes = json::array();  // in the kernel's argument order, as task.json lists them
  for (const SizeParam& s : t.sizes) sizes.push_back({{"name", s.name}, {"value", s.value}});
  json inputs = json::array(), outputs = json::array();
  for (const TensorSpec& s : t.inputs) inputs.push_back(ShapeJson(s));
  for (const TensorSpec& s : t.outputs) outputs.push_back(ShapeJson(s));
  json j = {{"id", t.id},           {"category", t.category}, {"description", t.description},
            {"signature", t.signature}, {"sizes", sizes},     {"inputs", inputs},
            {"outputs", outputs},   {"flops", t.flops},       {"bytes", t.bytes},
            {"threads", t.threads}, {"knobs", t.knobs.size()}};
  if (m) {
    j["measured"] = {{"reference_ms", m->reference_ms}, {"starter_ms", m->starter_ms},
                     {"starter_speedup", m->starter_speedup}};
    if (m->best_knob_speedup)
      j["measured"].update({{"best_knob_speedup", *m->best_knob_speedup}, {"best_knobs", m->best_knobs}});
  }
  return j;
}

// The table's figure columns; "-" where nothing was measured.
std::string ReferenceCell(const TaskMeasurement* m) { return m ? fmt::format("{:.2f} ms", m->reference_ms) : "-"; }
std::string StarterCell(const TaskMeasurement* m) { return m ? fmt::format("{:.3f}x", m->starter_speedup) : "-"; }
std::string BestKnobsCell(const Task& t, const TaskMeasurement* m) {
  if (t.knobs.empty()) return "";  // nothing to sweep
  return m && m->best_knob_speedup ? fmt::format("{:.2f}x", *m->best_knob_speedup) : "-";
}

}  // namespace

std::string SizesText(const Task& task) {
  std::string out;
  for (const SizeParam& s : task.sizes) out += (out.empty() ? "" : " ") + s.name + "=" + std::to_string(s.value);
  return out;
}

namespace {

std::string SizeSetText(const std::vector<SizeParam>& sizes) {
  std::string text;
  for (const SizeParam& s : sizes) text += (text.empty() ? "" : " ") + s.name + "=" + std::to_string(s.value);
  return text.empty() ? "(from its CONFIG)" : text;
}

// Each tensor's name, dtype (the version's) and shape at one size set.
json TensorsAt(const std::vector<TensorSpec>& tensors, const std::vector<SizeParam>& sizes, const BackendVariant& v) {
  json out = json::array();
  for (const TensorSpec& t : tensors) {
    json shape = json::array();
    if (t.extents.empty()) {
      for (int64_t d : t.shape) shape.push_back(d);
    } else {
      for (const Extent& e : t.extents) {
        int64_t value = e.literal;
        for (const SizeParam& s : sizes)
          if (!e.size.empty() && s.name == e.size) value = s.value;
        shape.push_back(value);
      }
    }
    out.push_back({{"name", t.name}, {"dtype", v.DTypeOf(t)}, {"shape", shape}});
  }
  return out;
}

// The tasks a subfolder backend (pallas) has a version of, with that version's size sets. No
// timings: without the backend's hardware there are none to show (docs/pallas.md).
int ListVariants(const TaskRegistry& registry, const std::vector<const Task*>& all, const TasksCommandOptions& options,
                 std::ostream& out) {
  std::vector<const Task*> tasks;
  for (const Task* t : all)
    if (t->variants.count(options.backend)) tasks.push_back(t);
  if (options.as_json) {
    json list = json::array();
    for (const Task* t : tasks) {
      const BackendVariant& v = t->variants.at(options.backend);
      json sets = json::object();
      for (const auto& [name, sizes] : v.size_sets) {
        json values = json::object();
        for (const SizeParam& s : sizes) values[s.name] = s.value;
        sets[name] = {{"sizes", values},
                      {"inputs", TensorsAt(t->inputs, sizes, v)},
                      {"outputs", TensorsAt(t->outputs, sizes, v)}};
      }
      list.push_back({{"id", t->id}, {"category", t->category}, {"backend", options.backend}, {"layout", v.layout},
                      {"size_sets", sets}});
    }
    out << list.dump(2) << "\n";
  } else {
    std::size_t id_width = 4, small_width = 5;
    for (const Task* t : tasks) {
      id_width = std::max(id_width, t->id.size());
      for (const auto& [name, sizes] : t->variants.at(options.backend).size_sets)
        if (name == "small") small_width = std::max(small_width, SizeSetText(sizes).size());
    }
    out << fmt::format("{} tasks in '{}' with a {} version\n", tasks.size(), options.suite, options.backend);
    out << fmt::format("{:<{}}  {:<{}}  {}\n", "id", id_width, "small (checks)", small_width, "full (compile, TPU timing)");
    for (const Task* t : tasks) {
      std::string small = SizeSetText({}), full = SizeSetText({});
      const BackendVariant& v = t->variants.at(options.backend);
      for (const auto& [name, sizes] : v.size_sets) {
        if (name == "small") small = SizeSetText(sizes);
        if (name == "full") full = SizeSetText(sizes);
      }
      std::string dtypes;  // the tensors whose dtype differs from task.json's (bfloat16 workloads)
      for (const auto& [tensor, dtype] : v.dtypes) dtypes += (dtypes.empty() ? "  [" : " ") + tensor + ":" + dtype;
      if (!dtypes.empty()) dtypes += "]";
      out << fmt::format("{:<{}}  {:<{}}  {}{}\n", t->id, id_width, small, small_width, full, dtypes);
    }
  }
  for (const std::string& e : registry.errors()) spdlog::warn("task not loaded: {}", e);
  if (tasks.empty()) {
    spdlog::error("no task in suite '{}' has a {} version", options.suite, options.backend);
    return 2;
  }
  return registry.errors().empty() ? 0 : 1;
}

}  // namespace

int RunTasksCommand(const TaskRegistry& registry, const std::filesystem::path& suites_root,
                    const TasksCommandOptions& options, std::ostream& out) {
  const std::vector<const Task*> tasks = registry.InSuite(options.suite);
  if (tasks.empty()) {
    spdlog::error("no tasks in suite '{}' (suites: {})", options.suite, fmt::join(registry.SuiteNames(), ", "));
    return 2;
  }
  // A backend with its own task folder lists that folder's size sets; the table below is the
  // task root's (the C++ version), with its measured figures.
  const BackendInfo* info = FindBackendInfo(options.backend);
  if (!info) {
    spdlog::error("no backend '{}'", options.backend);
    return 2;
  }
  if (options.measure && !info->times_on_any_host) {
    spdlog::error("--measure times starters here, which backend '{}' cannot do", options.backend);
    return 2;
  }
  if (!info->task_folder.empty()) return ListVariants(registry, tasks, options, out);

  Measurements figures;
  std::string source;  // where the figures come from, for the header line
  if (options.measure) {
    RegisterBuiltinBackends();
    BackendConfig config = DefaultBackendConfig();
    std::unique_ptr<Backend> backend = BackendRegistry::Global().Create(info->name, config);
    Progress progress(std::cerr, isatty(STDERR_FILENO) != 0, static_cast<int>(tasks.size()), "measuring");
    for (const Task* t : tasks) {
      const std::optional<TaskMeasurement> m = MeasureStarter(*backend, *t, options.budget_seconds);
      if (m) figures.tasks[t->id] = *m;
      progress.Step(t->id, m ? fmt::format("starter {:.3g} ms", m->starter_ms) : "not measured");
    }
    progress.Done();
    source = "measured now on this machine";
  } else {
    std::string error;
    if (auto loaded = LoadMeasurements(suites_root / kMeasurementsFile, error)) {
      figures = std::move(*loaded);
      source = fmt::format("recorded {} on {} ({}); `kernelgym tasks --measure` measures here", figures.date,
                           figures.machine, figures.command);
    } else if (!error.empty()) {
      spdlog::warn("{}", error);
    }
  }
  auto find = [&](const Task* t) -> const TaskMeasurement* {
    auto it = figures.tasks.find(t->id);
    return it == figures.tasks.end() ? nullptr : &it->second;
  };

  if (options.as_json) {
    json list = json::array();
    for (const Task* t : tasks) list.push_back(TaskJson(*t, find(t)));
    out << list.dump(2) << "\n";
  } else {
    std::size_t id_width = 4, category_width = 8, sizes_width = 5;
    for (const Task* t : tasks) {
      id_width = std::max(id_width, t->id.size());
      category_width = std::max(category_width, t->category.size());
      sizes_width = std::max(sizes_width, SizesText(*t).size());
    }
    out << fmt::format("{} tasks in '{}'{}\n", tasks.size(), options.suite,
                       source.empty() ? "" : "; figures " + source);
    out << fmt::format("{:<{}}  {:<{}}  {:<{}}  {:>10}  {:>8}  {:>10}\n", "id", id_width, "category",
                       category_width, "sizes", sizes_width, "reference", "starter", "best knobs");
    for (const Task* t : tasks) {
      const TaskMeasurement* m = find(t);
      out << fmt::format("{:<{}}  {:<{}}  {:<{}}  {:>10}  {:>8}  {:>10}\n", t->id, id_width, t->category,
                         category_width, SizesText(*t), sizes_width, ReferenceCell(m), StarterCell(m),
                         BestKnobsCell(*t, m));
    }
  }
  for (const std::string& e : registry.errors()) spdlog::warn("task not loaded: {}", e);
  return registry.errors().empty() ? 0 : 1;
}

}  // namespace kernelgym
