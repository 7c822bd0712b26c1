// The task schema: what a kernel must compute, on which inputs, to which tolerance.
// A Task is plain data, loaded once from a task folder (see docs/task_format.md) and then
// shared read-only by the runner, the harness and (later) the server.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace kernelgym {

enum class DType { kFloat32, kFloat64, kInt32, kInt64 };

std::string_view DTypeName(DType dtype);
std::optional<DType> ParseDType(std::string_view name);
std::size_t DTypeSize(DType dtype);
bool IsFloating(DType dtype);

// How an input tensor is drawn. The structured kinds exist for index inputs whose validity is
// part of the task (page tables, group sizes): they are always drawn whole, never element-wise.
struct Initializer {
  enum class Kind {
    kNormal,       // a = mean, b = std
    kUniform,      // values in [a, b)
    kRandInt,      // integers in [a, b)
    kPermutation,  // integers: every element distinct, drawn from [0, b) (b >= the element count;
                   // b == the count makes the flattened tensor a permutation), in random order
    kPartition,    // integers >= 0 that sum to b: the gaps between sorted cut points drawn
                   // uniformly from [0, b] (group sizes; empty groups occur)
  };
  Kind kind = Kind::kNormal;
  double a = 0.0;
  double b = 1.0;
  // uniform only, when > 0: values on the grid a, a + step, ... below b. Dyadic grids (step a
  // power of two) make sums of products exact in float32 whatever the order, for tasks whose
  // answer hangs on comparisons (a router's top-k) that rounding must not flip.
  double step = 0.0;
  // Bounds that follow the sizes (task.json names a size: randint `low` / `high`, permutation
  // `high`, partition `total`): a and b are re-read from these sizes whenever the shapes are
  // resolved (ResolveShapes). Empty: the bound is the literal in a / b. b_is_element_count: a
  // permutation without `high`, whose pool is its own element count. (`{}`: aggregate
  // initializations that stop at `step` stay free of -Wmissing-field-initializers.)
  std::string a_size{};
  std::string b_size{};
  bool b_is_element_count = false;

  // Drawn as a whole: a partial redraw would break the structure (duplicates, a wrong sum).
  bool IsStructured() const { return kind == Kind::kPermutation || kind == Kind::kPartition; }
};

struct Tolerance {
  double atol = 0.0;
  double rtol = 0.0;
};

// One entry of a tensor's shape as task.json writes it: a size's name, or (size empty) a literal.
struct Extent {
  std::string size;
  int64_t literal = 0;
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;       // resolved against the task's sizes (or a ShapeSet's)
  std::optional<Initializer> init;  // inputs only; its bounds resolved like `shape`
  Tolerance tolerance;              // outputs only (the task's, unless overridden)
  // The shape as task.json writes it, kept so that ResolveShapes can resolve it against other
  // sizes. Empty for a tensor made in code: its `shape` is then fixed. (`{}`: as Initializer's.)
  std::vector<Extent> extents{};

  int64_t NumElements() const;
  std::size_t NumBytes() const { return static_cast<std::size_t>(NumElements()) * DTypeSize(dtype); }
};

struct SizeParam {
  std::string name;
  int64_t value = 0;

  bool operator==(const SizeParam&) const = default;
};

// Which headers a candidate may include and which shared libraries it may import from.
struct KernelPolicy {
  std::vector<std::string> extra_allowed_headers;
  std::vector<std::string> allowed_libraries{"libc", "libm", "libgomp", "libstdc++", "libgcc_s"};
};

// One parameter of a task's knob template (the `knobs` action): a finite domain of integers or of
// strings, all of one kind. A chosen value reaches the template as the line `#define NAME value`.
struct Knob {
  using Value = std::variant<int64_t, std::string>;
  std::string name;           // an UPPER_CASE C identifier, not a size or tensor name of the task
  std::vector<Value> values;  // the domain, in task.json's order; non-empty, no duplicates
  Value default_value;        // one of `values`: what a knob not given in an action takes
};

// How a knob value is written after `#define NAME ` (and in messages): an integer in decimal, a
// string as it is (a token such as `std::exp`, not a C string literal).
std::string KnobValueText(const Knob::Value& value);

// The language a knob template is written in, which says how a chosen value reaches it: C
// (`#define NAME value`, task.json's template.cpp) or Python (`NAME = value`, a backend version's
// template.py, where a string value is written as a string literal and so never becomes code).
enum class KnobLanguage { kC, kPython };

struct Task;

// The line that gives `knob` the value `value` in a template of `language`.
std::string KnobLine(const Knob& knob, const Knob::Value& value, KnobLanguage language);

// Reads a `knobs` object and the template it parameterizes from `config` (task.json, or a backend
// version's pallas.json; "template" names a file in `dir`, by default template.cpp or template.py)
// into `knobs` (sorted by name) and `template_source`. A config without "knobs" leaves both
// empty. Python string values must be identifiers (they are written as string literals; nothing
// else could make them code). "" on success, else "<field>: <what is wrong>".
[[nodiscard]] std::string LoadKnobTemplate(const nlohmann::json& config, const std::filesystem::path& dir, const Task& task,
                                           KnobLanguage language, std::vector<Knob>& knobs, std::string& template_source);

// A task's version for a backend other than `cpu`: a subfolder named after the backend (today
// `pallas/`) whose sources that backend's runner reads itself (JAX reference, Pallas starter).
// The registry knows that it exists, what an episode starts from and its size sets (for
// listings); the semantics stay the task's (task.json's tensors, initializers, tolerances).
struct BackendVariant {
  std::filesystem::path dir;
  std::string layout = "kernelgym";  // or "jaxbench": a JAXBench `baseline.py` folder (docs/pallas.md)
  std::string starter_source;        // what an episode on this backend starts from
  // Named size sets (pallas: "small" and "check" for interpret-mode correctness, "full" for the
  // TPU compile and timing); empty for the jaxbench layout, whose shapes live in its CONFIG.
  std::vector<std::pair<std::string, std::vector<SizeParam>>> size_sets;
  // The dtype of each input and output whose version overrides task.json's (pallas: bfloat16 for
  // the TPU workloads), by tensor name; a tensor not named keeps task.json's dtype.
  std::map<std::string, std::string> dtypes;
  // The version's knob template (its config's `knobs`, its template.py): empty when it has none.
  // A chosen value reaches the template as the Python line `NAME = value` (KnobLanguage::kPython).
  std::vector<Knob> knobs;
  std::string template_source;
  // The dtype name a tensor has in this version.
  std::string DTypeOf(const TensorSpec& tensor) const;
};

// The dtypes a folder-loaded version (the JAX TPU one) may give an input, and an output (its judge's
// the same lists): what JAX TPU kernels take; outputs reach the runner as float32 or int32.
const std::vector<std::string>& FolderVariantInputDTypes();
const std::vector<std::string>& FolderVariantOutputDTypes();

struct Task {
  std::string id;  // "suite/name"
  std::string category;
  std::string description;
  std::vector<SizeParam> sizes;   // the timed sizes: what the inputs and outputs below are resolved at
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  // task.json "check_sizes": further size sets, each naming every size (in task.json's order
  // here), on which correctness is also checked — never timed — so that a kernel which hard-codes
  // the timed shape fails. Required (at least one) for a task with a cpu version.
  std::vector<std::vector<SizeParam>> check_sizes;
  Tolerance tolerance;
  double flops = 0;  // per call; an FMA counts 2
  double bytes = 0;  // compulsory traffic per call
  std::string signature;
  int threads = 1;
  int trials = 3;
  std::vector<std::string> compile_flags{"-O3", "-march=native", "-fopenmp"};
  KernelPolicy policy;

  std::filesystem::path dir;
  // TaskFolderDigest(dir) at load: a job carries it, and a runner whose own copy of the task has
  // another digest refuses the job (the shapes, tolerances or reference could differ).
  std::string digest;
  std::string reference_source;  // TorchScript defining `reference`
  std::string starter_source;    // naive C++ kernel
  std::vector<Knob> knobs;       // sorted by name; empty: the task has no knob template
  std::string template_source;   // the kernel the knobs' #define lines are prepended to (when knobs)
  bool has_cpu_version = true;   // false for tasks that exist only for another backend (jaxbench layout)
  std::map<std::string, BackendVariant> variants;  // by backend name ("pallas")

  std::string Suite() const { return id.substr(0, id.find('/')); }
  // Whether an episode on `backend` can run this task, and the source it starts from.
  bool Supports(std::string_view backend) const;
  const std::string& StarterFor(std::string_view backend) const;  // Supports(backend) must hold
};

// One assignment of the task's sizes, with the tensors resolved against it.
struct ShapeSet {
  std::vector<SizeParam> sizes;  // every size of the task, in task.json order
  std::vector<TensorSpec> inputs, outputs;
};

// The task's tensors re-resolved against `sizes` (every size of the task, each named once, in
// any order): shapes, and the initializer bounds that name a size (partition totals, permutation
// pools, randint bounds). Everything else (dtypes, tolerances, the other initializers) is the
// task's. The sizes must be valid for the task — task.sizes, an entry of task.check_sizes, or
// any set that passes the checks the loader applies to check_sizes (docs/task_format.md);
// otherwise it throws std::invalid_argument naming the size or tensor field at fault.
ShapeSet ResolveShapes(const Task& task, const std::vector<SizeParam>& sizes);

// The shape sets correctness is checked on: [0] the timed sizes (task.sizes, with exactly
// task.inputs and task.outputs), then one per entry of task.check_sizes, in order.
std::vector<ShapeSet> CorrectnessShapeSets(const Task& task);

// The C signature a task's inputs, outputs and sizes imply, e.g.
// "void kernel(const float* x, float* y, int64_t N)". task.json must state exactly this.
std::string ExpectedSignature(const Task& task);

struct TaskLoadResult {
  std::optional<Task> task;
  std::string error;  // "<file>: <field>: <what is wrong>" when task is empty
};

// Loads and validates a task folder. Never throws for a bad task: the error names the file and
// the field.
[[nodiscard]] TaskLoadResult LoadTask(const std::filesystem::path& dir);

}  // namespace kernelgym
