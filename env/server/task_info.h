// What tasks.list and tasks.get answer about a task (env/protocol/task_info.h), built from the
// loaded task: once per task when the server loads the suites, never from disk in the event loop.
#pragma once

#include "datasets/task.h"
#include "env/protocol/task_info.h"

namespace kernelgym::server {

protocol::TaskSummary TaskSummaryOf(const Task& task);
// The summary, the task's sizes, tensors, tolerance and knobs, and per backend its version (each
// version's reference file is read here).
protocol::TaskInfo TaskInfoOf(const Task& task);

}  // namespace kernelgym::server
