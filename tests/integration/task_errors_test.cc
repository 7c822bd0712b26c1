// A broken task is the environment's fault, not the kernel's: its evaluations end in
// internal_error with a message that names the problem, and the runner carries on.
#include <gtest/gtest.h>

#include "eval_fixture.h"

namespace kernelgym::testing {
namespace fs = std::filesystem;

namespace {

// A copy of cpu/softmax_rows under a temporary suites root, with reference.py replaced.
Task SoftmaxWithReference(const std::string& name, const std::string& reference) {
  const fs::path root = TestTempDir() / name;
  const fs::path dir = root / "cpu" / "softmax_rows";
  fs::create_directories(dir);
  const fs::path original = SourceDir() / "datasets/suites/cpu/softmax_rows";
  for (const char* file : {"task.json", "starter.cpp", "template.cpp"})
    fs::copy_file(original / file, dir / file, fs::copy_options::overwrite_existing);
  std::ofstream(dir / "reference.py") << reference;
  TaskLoadResult loaded = LoadTask(dir);
  EXPECT_TRUE(loaded.task.has_value()) << name << ": " << loaded.error;
  return *loaded.task;
}

TEST(TaskErrorsTest, ReferenceThatDoesNotCompileIsAnInternalError) {
  const Task task = SoftmaxWithReference("syntax", "def reference(x: Tensor) -> Tensor:\n    return torch.softmax(x, dim=\n");
  const EvalResult r = Cpu().Evaluate(task, task.starter_source, FastOptions());
  EXPECT_EQ(r.status, Status::kInternalError) << r.message;
  EXPECT_NE(r.message.find("TorchScript"), std::string::npos) << r.message;
}

TEST(TaskErrorsTest, ReferenceWithTheWrongShapeIsAnInternalError) {
  const Task task = SoftmaxWithReference("shape", "def reference(x: Tensor) -> Tensor:\n    return torch.softmax(x, dim=1).t()\n");
  const EvalResult r = Cpu().Evaluate(task, task.starter_source, FastOptions());
  EXPECT_EQ(r.status, Status::kInternalError) << r.message;
  EXPECT_NE(r.message.find("shape"), std::string::npos) << r.message;
}

TEST(TaskErrorsTest, ReferenceThatRaisesIsAnInternalError) {
  const Task task = SoftmaxWithReference("raises", "def reference(x: Tensor) -> Tensor:\n    return x @ x\n");
  const EvalResult r = Cpu().Evaluate(task, task.starter_source, FastOptions());
  EXPECT_EQ(r.status, Status::kInternalError) << r.message;
  EXPECT_NE(r.message.find("reference raised"), std::string::npos) << r.message;
}

TEST(TaskErrorsTest, TheRunnerCarriesOnAfterABrokenTask) {
  const Task* good = Tasks().Find("cpu/softmax_rows");
  ASSERT_NE(good, nullptr);
  const EvalResult r = Cpu().Evaluate(*good, good->starter_source, FastOptions());
  EXPECT_EQ(r.status, Status::kOk) << r.message;
}

}  // namespace
}  // namespace kernelgym::testing

namespace kernelgym::testing {
namespace {

// A harness that dies at once (here: a stand-in that exits 3 without reading its job) is an
// internal error with the exit status in the message, and the runner process survives it.
TEST(EnvironmentErrorsTest, AHarnessThatDiesAtOnceIsAnInternalError) {
  const fs::path tools = TestTempDir() / "tools";
  fs::create_directories(tools);
  // The judge and the two programs it would start (never reached: the judge exits first).
  for (const char* name : {"kernelgym-harness", "kernelgym-reference", "kernelgym-executor"}) {
    std::ofstream(tools / name) << "#!/bin/sh\nexit 3\n";
    fs::permissions(tools / name, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                      fs::perms::others_read | fs::perms::others_exec);
  }
  RegisterBuiltinBackends();
  BackendConfig config = DefaultBackendConfig();
  config.tools_dir = tools.string();
  std::unique_ptr<Backend> backend = BackendRegistry::Global().Create("cpu", config);
  const Task* task = Tasks().Find("cpu/softmax_rows");
  ASSERT_NE(task, nullptr);
  EvalOptions options = FastOptions();
  options.run_timing = false;
  for (int i = 0; i < 3; ++i) {  // repeatedly (writing the job to a dead harness raised SIGPIPE when the race went that way)
    const EvalResult r = backend->Evaluate(*task, task->starter_source, options);
    EXPECT_EQ(r.status, Status::kInternalError) << r.message;
    EXPECT_NE(r.message.find("status 3"), std::string::npos) << r.message;
  }
}

}  // namespace
}  // namespace kernelgym::testing
