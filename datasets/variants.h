// Loading a task's versions for other backends (the `pallas/` subfolder next to task.json), and
// tasks that exist only for the pallas backend: a folder in JAXBench's layout.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "datasets/task.h"

namespace kernelgym {

// Backends whose tasks come from a subfolder of the task (`<task>/<backend>/`), never from the
// C++ starter: a task without that subfolder is not offered on them.
bool IsVariantBackend(std::string_view backend);

// Reads, for every backend whose descriptor's task_loader is "folder", `<task.dir>/<task_folder>/`
// when it exists: <task_folder>.json (size sets "small", "check" and "full", each giving exactly
// the task's sizes; the dtypes its "inputs"/"outputs" overrides name), reference.py and starter.py.
// Empty on success, else "<file>: <field>: <what is wrong>".
[[nodiscard]] std::string LoadVariants(Task& task);

struct JaxBenchLoad {
  std::vector<Task> tasks;
  std::vector<std::string> errors;
};

// A JAXBench checkout's `benchmark/` folder (or any folder of `<id>/baseline.py`): one task per
// case, id `<suite>/<id>`, for the backend whose descriptor lists the "jaxbench" layout only. The case's shapes, inputs and reference live in its
// baseline.py (CONFIG, create_inputs, workload, get_flops), which the pallas judge imports; the
// registry reads CONFIG's text for the description only. A case's `starter.py`, when present,
// is what episodes start from; without one they start from a stub that asks for `kernel(...)`.
[[nodiscard]] JaxBenchLoad LoadJaxBenchLayout(const std::filesystem::path& benchmark_dir, const std::string& suite);

}  // namespace kernelgym
