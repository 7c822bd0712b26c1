// The task registry: every task folder under a suites root, looked up by id.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "datasets/task.h"

namespace kernelgym {

class TaskRegistry {
 public:
  // Loads every `<root>/<suite>/<name>/task.json`, then, when $KERNELGYM_JAXBENCH_DIR names a
  // folder of JAXBench cases, those (suite $KERNELGYM_JAXBENCH_SUITE, default "jaxbench-ext").
  // Tasks that fail to load are kept in `errors()` (one line each) instead of aborting the scan.
  static TaskRegistry LoadFrom(const std::filesystem::path& suites_root);

  // Adds the cases of a folder in JAXBench's layout (`<id>/baseline.py`) as suite `suite`,
  // pallas-only (datasets/variants.h). Cases that fail to load go to errors().
  void AddJaxBenchLayout(const std::filesystem::path& benchmark_dir, const std::string& suite);

  const Task* Find(const std::string& id) const;
  std::vector<const Task*> All() const;
  // The tasks of a suite: a folder's name ("cpu", "jaxbench-p", "jaxbench-k", "models"), or a
  // union: "jaxbench" (jaxbench-p + jaxbench-k), "all" or "" (every task). Empty when unknown.
  std::vector<const Task*> InSuite(const std::string& suite) const;
  // The suite names InSuite accepts, folders first, then the unions that have tasks.
  std::vector<std::string> SuiteNames() const;
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::map<std::string, Task> tasks_;
  std::vector<std::string> errors_;
};

// Where the bundled suites live: $KERNELGYM_SUITES if set, else the source tree's
// datasets/suites (compiled in), so binaries work from any directory.
std::filesystem::path DefaultSuitesRoot();

}  // namespace kernelgym
