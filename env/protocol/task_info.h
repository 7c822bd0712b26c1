// What tasks.list and tasks.get answer about a task, typed (docs/protocol.md lists every
// field). The server builds each task's TaskInfo once, when it loads the suites; a client reads
// these fields and never the task's files: the sizes, tensors and tolerance the environment checks
// against, the knobs' domains, and per backend the version a policy edits (its starter and
// reference).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "env/protocol/messages.h"

namespace kernelgym::protocol {

// tasks.list's entry for a task (and the first fields of tasks.get).
struct TaskSummary {
  std::string id;           // "suite/name"
  std::string suite;
  std::string category;
  std::string description;
  std::string signature;    // the cpu version's entry point
  double flops = 0;         // per call at the timed sizes; an FMA counts 2
  double bytes = 0;         // compulsory memory traffic per call
  int64_t threads = 1;      // threads the kernel may use
  std::vector<std::string> backends;  // the runner backends with a version of the task
  bool operator==(const TaskSummary&) const = default;
};

// One input or output. `dims` is the shape as the task writes it (size names or literals, e.g.
// ["R", "C"]); `shape` is it resolved at the timed sizes.
struct TensorInfo {
  std::string name;
  std::string dtype;  // "float32", "float64", "int32", "int64"
  std::vector<std::string> dims;
  std::vector<int64_t> shape;
  double atol = 0, rtol = 0;  // outputs: the tolerance this output is checked to (inputs: 0)
  bool operator==(const TensorInfo&) const = default;
};

// A knob of the task's template: its domain and the value a knob not given takes.
struct KnobDomain {
  std::vector<KnobValue> values;
  KnobValue default_value;
  bool operator==(const KnobDomain&) const = default;
};

// One backend's version of the task: what an episode on it starts from and is checked against.
struct TaskVersion {
  std::string starter_source;
  std::string reference_source;  // cpu: TorchScript; pallas: JAX (reference.py, or JAXBench's baseline.py)
  // Named size sets beyond the task's own (pallas: "small", "check", "full"); empty when the
  // version's shapes live in its own files (the JAXBench layout) or it has none.
  std::map<std::string, std::map<std::string, int64_t>> size_sets;
  // The rules a source is built under (cpu: the compiler's flags, the headers beyond the standard
  // ones and the libraries it may import from; empty for a backend without a compile step).
  std::vector<std::string> compile_flags;
  std::vector<std::string> extra_allowed_headers;
  std::vector<std::string> allowed_libraries;
  // A version loaded from a task subfolder (pallas): its own knob template, by name (pallas.json's,
  // whose template is Python); a `knobs` action on that backend ranges over these. Empty: none,
  // and always for the root (cpu) version, whose template is the top-level `knobs`. On the wire
  // only when non-empty.
  std::map<std::string, KnobDomain> knobs;
  bool operator==(const TaskVersion&) const = default;
};

// tasks.get: everything a policy may know about a task.
struct TaskInfo {
  TaskSummary summary;
  std::map<std::string, int64_t> sizes;                     // the timed sizes
  std::vector<std::map<std::string, int64_t>> check_sizes;  // further sizes correctness is checked at
  std::vector<TensorInfo> inputs, outputs;
  double atol = 0, rtol = 0;                                // the task's tolerance
  std::map<std::string, KnobDomain> knobs;                  // by name; empty: no knob template
  std::map<std::string, TaskVersion> versions;              // by backend, one per summary.backends entry
  bool operator==(const TaskInfo&) const = default;
};

// The wire trees (maps whose keys are the fields' names; tasks.get's is the summary's fields and
// the rest side by side).
nlohmann::json ToWire(const TaskSummary& summary);
nlohmann::json ToWire(const TaskInfo& info);

// Wire tree -> typed; nullopt with `problem` naming the field when the tree does not have the
// format (fields beyond these are ignored: a newer server may send more).
std::optional<TaskSummary> TaskSummaryFromWire(const nlohmann::json& wire, std::string& problem);
// tasks.list's result: {"tasks": [summary, ...]}.
std::optional<std::vector<TaskSummary>> TaskListFromWire(const nlohmann::json& wire, std::string& problem);
std::optional<TaskInfo> TaskInfoFromWire(const nlohmann::json& wire, std::string& problem);

}  // namespace kernelgym::protocol
