// What tasks.list and tasks.get answer about a task.
#pragma once

#include <nlohmann/json.hpp>

#include "datasets/task.h"

namespace kernelgym::server {

// id, suite, category, description, signature, flops, bytes, threads.
nlohmann::json TaskSummary(const Task& task);
// The summary plus the task's own task.json ("spec", docs/task_format.md), the starter and the
// reference source: everything a policy may know about the task.
nlohmann::json TaskDetails(const Task& task);

}  // namespace kernelgym::server
