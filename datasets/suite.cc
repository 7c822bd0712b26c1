#include "datasets/suite.h"

#include <algorithm>
#include <cstdlib>

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
  return registry;
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

}  // namespace kernelgym
