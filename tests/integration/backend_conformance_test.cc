// Every backend in the registry keeps the Backend contract (tpu_runner/backend.h): a new backend
// gets these checks by being registered. It evaluates a task's starter and three kinds of bad
// input; it never throws; every result names the task and the backend, the stage it reached and
// a status with a one-line message; and the backend's descriptor agrees with it.
#include <gtest/gtest.h>

#include <cctype>

#include "core/backend_info.h"
#include "eval_fixture.h"

namespace kernelgym::testing {
namespace {

std::vector<std::string> RegisteredBackends() {
  RegisterBuiltinBackends();
  return BackendRegistry::Global().Names();
}

// A task the backend has a version of: the first in id order (cpu/attention for the bundled ones).
const Task* ATaskFor(const std::string& backend) {
  for (const Task* t : Tasks().All())
    if (t->Supports(backend)) return t;
  return nullptr;
}

class BackendConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    BackendConfig config = DefaultBackendConfig();
    config.prestart_harness = false;  // one or two evaluations: a pre-started one would be wasted
    backend_ = BackendRegistry::Global().Create(GetParam(), config);
    ASSERT_NE(backend_, nullptr);
    task_ = ATaskFor(GetParam());
    ASSERT_NE(task_, nullptr) << "no bundled task has a " << GetParam() << " version";
    info_ = FindBackendInfo(GetParam());
    ASSERT_NE(info_, nullptr) << GetParam() << " has no descriptor in core/backend_info.cc";
  }

  EvalResult Evaluate(const std::string& source) {
    EvalOptions options = FastOptions();
    options.run_timing = false;
    options.estimates = false;
    options.call_timeout_seconds = 20;  // pallas's interpret mode on a loaded machine
    try {
      return backend_->Evaluate(*task_, source, options);
    } catch (const std::exception& e) {
      ADD_FAILURE() << GetParam() << " threw: " << e.what();
    }
    return {};
  }

  void ExpectWellFormed(const EvalResult& r) {
    EXPECT_EQ(r.backend, GetParam());
    EXPECT_EQ(r.task_id, task_->id);
    EXPECT_FALSE(r.message.empty()) << StatusName(r.status);
    EXPECT_EQ(r.message.find('\n'), std::string::npos) << "one line: " << r.message;
  }

  std::unique_ptr<Backend> backend_;
  const Task* task_ = nullptr;
  const BackendInfo* info_ = nullptr;
};

TEST_P(BackendConformanceTest, ItsNameAndDescriptorAgree) {
  EXPECT_EQ(backend_->name(), GetParam());
  EXPECT_EQ(info_->name, GetParam());
  EXPECT_EQ(task_->Supports(GetParam()), true);
  if (!info_->task_folder.empty()) EXPECT_TRUE(task_->variants.count(GetParam())) << "its task folder is loaded";
}

TEST_P(BackendConformanceTest, TheStarterIsCorrect) {
  const EvalResult r = Evaluate(task_->StarterFor(GetParam()));
  ExpectWellFormed(r);
  EXPECT_EQ(r.status, Status::kOk) << r.message;
}

// Bad input of every kind a policy sends gets a result, never an exception: empty, not code at
// all, and bytes that are not UTF-8. A backend that judges kernels refuses each of them.
TEST_P(BackendConformanceTest, BadInputIsAResultNeverAnException) {
  for (const std::string source : {std::string(), std::string("this is not a kernel\n"), std::string("\xff\xfe kernel")}) {
    SCOPED_TRACE(source);
    const EvalResult r = Evaluate(source);
    ExpectWellFormed(r);
    if (GetParam() != "null") EXPECT_NE(r.status, Status::kOk) << r.message;
  }
}

std::string Name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Registry, BackendConformanceTest, ::testing::ValuesIn(RegisteredBackends()), Name);

}  // namespace
}  // namespace kernelgym::testing
