#include "datasets/suite.h"

#include <algorithm>
#include <cstdlib>

#include "datasets/variants.h"

namespace kernelgym {

TaskRegistry TaskRegistry::LoadFrom(const std::filesystem::path& suites_root) {
  TaskRegistry registry;
  std::error_code ec;
  if (!std::filesystem::is_directory(suites_root, ec)) {
    registry.errors_.push_back(suites_root.string() + ": suites folder not found");
    return registry;
  }
  std::vector<std::filesystem::path> dirs;
  for (const auto& suite : std::filesystem::directory_iterator(suites_root))
    if (suite.is_directory())
      for (const auto& task : std::filesystem::directory_iterator(suite.path()))
        if (task.is_directory() && std::filesystem::exists(task.path() / "task.json")) dirs.push_back(task.path());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    TaskLoadResult loaded = LoadTask(dir);
    if (!loaded.task) {
      registry.errors_.push_back(loaded.error);
      continue;
    }
    std::string id = loaded.task->id;
    registry.tasks_.emplace(std::move(id), std::move(*loaded.task));
  }
  if (const char* jaxbench = std::getenv("KERNELGYM_JAXBENCH_DIR"); jaxbench && *jaxbench) {
    const char* suite = std::getenv("KERNELGYM_JAXBENCH_SUITE");
    registry.AddJaxBenchLayout(jaxbench, suite && *suite ? suite : "jaxbench-ext");
  }
  return registry;
}

void TaskRegistry::AddJaxBenchLayout(const std::filesystem::path& benchmark_dir, const std::string& suite) {
  JaxBenchLoad loaded = LoadJaxBenchLayout(benchmark_dir, suite);
  for (std::string& e : loaded.errors) errors_.push_back(std::move(e));
  for (Task& task : loaded.tasks) {
    if (tasks_.count(task.id)) {
      errors_.push_back(task.dir.string() + ": task id " + task.id + " is taken; choose another suite name");
      continue;
    }
    std::string id = task.id;
    tasks_.emplace(std::move(id), std::move(task));
  }
}

const Task* TaskRegistry::Find(const std::string& id) const {
  auto it = tasks_.find(id);
  return it == tasks_.end() ? nullptr : &it->second;
}

std::vector<const Task*> TaskRegistry::All() const {
  std::vector<const Task*> out;
  for (const auto& [id, task] : tasks_) out.push_back(&task);
  return out;
}

std::filesystem::path DefaultSuitesRoot() {
  if (const char* env = std::getenv("KERNELGYM_SUITES")) return env;
  return KERNELGYM_SUITES_DIR;
}

std::vector<const Task*> TaskRegistry::InSuite(const std::string& suite) const {
  std::vector<const Task*> out;
  for (const Task* t : All()) {
    const std::string own = t->Suite();
    if (suite.empty() || suite == "all" || own == suite || (suite == "jaxbench" && (own == "jaxbench-p" || own == "jaxbench-k")))
      out.push_back(t);
  }
  return out;
}

std::vector<std::string> TaskRegistry::SuiteNames() const {
  std::vector<std::string> names;
  for (const Task* t : All())
    if (std::find(names.begin(), names.end(), t->Suite()) == names.end()) names.push_back(t->Suite());
  if (!InSuite("jaxbench").empty()) names.push_back("jaxbench");
  names.push_back("all");
  return names;
}

}  // namespace kernelgym
