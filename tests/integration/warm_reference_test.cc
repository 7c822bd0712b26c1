// The warm reference (tpu_runner/cpu/harness_zygote.h): each evaluation's reference is forked
// from a zygote that loaded libtorch once, and is still a fresh process per evaluation; a zygote
// that dies is started again; an evaluation in flight when it dies ends, with an error.
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/integration/eval_fixture.h"
#include "tpu_runner/cpu/harness_session.h"
#include "tpu_runner/cpu/harness_zygote.h"

namespace kernelgym::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<Backend> MakeCpu(bool zygote) {
  RegisterBuiltinBackends();
  BackendConfig config = DefaultBackendConfig();
  config.prestart_harness = false;
  config.reference_zygote = zygote;
  return BackendRegistry::Global().Create("cpu", config);
}

double ReferenceStartCpu(const EvalResult& r) {
  const auto it = r.stage_seconds.find("reference_start_cpu");
  return it == r.stage_seconds.end() ? -1 : it->second;
}

std::vector<std::string> Argv(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::vector<std::string> argv;
  for (std::string arg; std::getline(in, arg, '\0');) argv.push_back(arg);
  return argv;
}

pid_t Parent(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const std::size_t close = line.rfind(')');
  char state;
  int parent = 0;
  if (close == std::string::npos || std::sscanf(line.c_str() + close + 1, " %c %d", &state, &parent) != 2) return 0;
  return parent;
}

bool IsZygoteImage(pid_t pid) {
  const std::vector<std::string> argv = Argv(pid);
  return argv.size() > 1 && std::filesystem::path(argv[0]).filename() == "kernelgym-reference" && argv[1] == "--zygote";
}

// The zygotes below this test process: `kernelgym-reference --zygote` whose parent is the
// sandbox (its keepers and references are forks of it, with its command line; where bwrap cannot
// run, the zygote's parent is this process).
std::set<pid_t> Zygotes() {
  std::set<pid_t> found;
  DIR* proc = opendir("/proc");
  while (dirent* e = proc ? readdir(proc) : nullptr) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0 || !IsZygoteImage(pid)) continue;
    const std::vector<std::string> parent = Argv(Parent(pid));
    if (Parent(pid) != getpid() && (parent.empty() || std::filesystem::path(parent[0]).filename() != "bwrap")) continue;
    for (pid_t p = Parent(pid); p > 1; p = Parent(p))
      if (p == getpid()) {
        found.insert(pid);
        break;
      }
  }
  if (proc) closedir(proc);
  return found;
}

const Task& Softmax() {
  const Task* task = Tasks().Find("cpu/softmax_rows");
  EXPECT_NE(task, nullptr);
  return *task;
}

// A spawned reference pays for loading libtorch (its CPU time before its job); a forked one
// does not — and the second evaluation's reference is not the first one's again: a process that
// had run the first evaluation's reference calls (the trials, the reference alone, timing) would
// report their CPU time too.
TEST(WarmReferenceTest, TheReferenceIsForkedWarmAndFreshForEachEvaluation) {
  const Task& task = Softmax();
  const std::unique_ptr<Backend> spawned = MakeCpu(false), forked = MakeCpu(true);
  const EvalResult cold = spawned->Evaluate(task, task.starter_source, FastOptions());
  ASSERT_EQ(cold.status, Status::kOk) << cold.message;
  EXPECT_GT(ReferenceStartCpu(cold), 0.1) << "a spawned reference loads libtorch itself";
  for (int i = 0; i < 2; ++i) {
    const EvalResult warm = forked->Evaluate(task, task.starter_source, FastOptions());
    ASSERT_EQ(warm.status, Status::kOk) << warm.message;
    ASSERT_TRUE(warm.timing.has_value());
    EXPECT_GE(ReferenceStartCpu(warm), 0);
    EXPECT_LT(ReferenceStartCpu(warm), 0.05) << "evaluation " << i << ": the reference did not start warm";
    // Every protection the spawned harness had (the namespaces, the executor's uid, file view,
    // seccomp, the keyed inputs, the separate reference process, ...), the forked one has.
    EXPECT_EQ(warm.protections, cold.protections);
    EXPECT_EQ(warm.protections.at("separate_reference_process"), true);
    EXPECT_EQ(warm.protections.at("keyed_inputs"), true);
  }
  const std::set<pid_t> zygotes = Zygotes();
  ASSERT_EQ(zygotes.size(), 1u) << "one zygote per backend and thread count";
  // fork() copies one thread: a reference forked from a zygote with other threads could inherit
  // a lock one of them held. Loading libtorch starts none.
  int threads = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(*zygotes.begin()) + "/task")) {
    (void)entry;
    ++threads;
  }
  EXPECT_EQ(threads, 1);
}

// A zygote killed between evaluations is started again by the next one, which succeeds warm.
TEST(WarmReferenceTest, AKilledZygoteIsStartedAgainAndTheNextEvaluationSucceeds) {
  const Task& task = Softmax();
  const std::unique_ptr<Backend> backend = MakeCpu(true);
  EvalOptions options = FastOptions();
  options.run_timing = false;
  ASSERT_EQ(backend->Evaluate(task, task.starter_source, options).status, Status::kOk);
  const std::set<pid_t> before = Zygotes();
  ASSERT_EQ(before.size(), 1u);
  ASSERT_EQ(kill(*before.begin(), SIGKILL), 0);
  const EvalResult again = backend->Evaluate(task, task.starter_source, options);
  EXPECT_EQ(again.status, Status::kOk) << again.message;
  EXPECT_LT(ReferenceStartCpu(again), 0.05) << "the evaluation after the kill fell back to a cold reference";
  const std::set<pid_t> after = Zygotes();
  ASSERT_EQ(after.size(), 1u);
  EXPECT_NE(*after.begin(), *before.begin());
}

// The zygote dies with an evaluation's judge already forked and its job not yet sent: the
// evaluation ends promptly with an internal error (the sandbox went with it), never hangs, and
// the next harness comes from a zygote started again.
TEST(WarmReferenceTest, AnEvaluationInFlightWhenTheZygoteDiesEndsWithAnError) {
  const BackendConfig config = DefaultBackendConfig();
  const std::filesystem::path scratch = std::filesystem::temp_directory_path() / ("kg-zygote-" + std::to_string(getpid()));
  std::filesystem::create_directories(scratch);
  {
    HarnessZygote zygote(config.tools_dir, scratch, 1);
    std::string error;
    std::unique_ptr<HarnessProcess> harness = zygote.Fork({}, error);
    ASSERT_NE(harness, nullptr) << error;
    ASSERT_TRUE(harness->AwaitWarm(30));
    const std::set<pid_t> zygotes = Zygotes();
    ASSERT_EQ(zygotes.size(), 1u);
    kill(*zygotes.begin(), SIGKILL);
    const Task& task = Softmax();
    EvalOptions options = FastOptions();
    options.run_timing = false;
    const auto start = Clock::now();
    // Any file will do as the "kernel": the judge is gone before it could load one.
    auto run = std::async(std::launch::async, [&] {
      return RunHarnessSession(task, "/proc/self/exe", std::move(harness), options);
    });
    ASSERT_EQ(run.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "the evaluation hung";
    const HarnessRun r = run.get();
    EXPECT_NE(r.status, Status::kOk);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 30);
    std::unique_ptr<HarnessProcess> next = zygote.Fork({}, error);
    ASSERT_NE(next, nullptr) << error;
    EXPECT_TRUE(next->AwaitWarm(30));
    EXPECT_EQ(zygote.starts(), 2);
  }
  std::filesystem::remove_all(scratch);
}

// The judges (`kernelgym-harness`) below this test process.
std::set<pid_t> Judges() {
  std::set<pid_t> found;
  DIR* proc = opendir("/proc");
  while (dirent* e = proc ? readdir(proc) : nullptr) {
    const pid_t pid = std::atoi(e->d_name);
    const std::vector<std::string> argv = pid > 0 ? Argv(pid) : std::vector<std::string>{};
    if (argv.empty() || std::filesystem::path(argv[0]).filename() != "kernelgym-harness") continue;
    for (pid_t p = Parent(pid); p > 1; p = Parent(p))
      if (p == getpid()) {
        found.insert(pid);
        break;
      }
  }
  if (proc) closedir(proc);
  return found;
}

// One-shot use (the CLI, config.start_harness_before_compile): the judge, and with it the
// reference's libtorch load, starts before the compile, so the two overlap. Seen here with a
// source that does not compile: its judge is running while g++ works, and is gone (killed and
// reaped) once the evaluation has returned its compile error. Without the early start no judge
// would ever run for it.
TEST(WarmReferenceTest, OneShotUseStartsTheJudgeBeforeTheCompileAndEndsItWhenTheCompileFails) {
  RegisterBuiltinBackends();
  BackendConfig config = DefaultBackendConfig();
  config.prestart_harness = false;
  config.reference_zygote = false;
  config.start_harness_before_compile = true;
  const std::unique_ptr<Backend> cpu = BackendRegistry::Global().Create("cpu", config);
  const Task& task = Softmax();
  ASSERT_TRUE(Judges().empty());
  // New to the compile cache (which keeps compile errors too): a cached error would return
  // before any judge could be seen.
  const std::string broken = task.starter_source + "\nstatic_assert(false, \"does not compile\"); // " +
                             std::to_string(getpid()) + "-" +
                             std::to_string(Clock::now().time_since_epoch().count()) + "\n";
  auto run = std::async(std::launch::async, [&] { return cpu->Evaluate(task, broken, FastOptions()); });
  bool seen = false;
  while (run.wait_for(std::chrono::milliseconds(2)) != std::future_status::ready) seen = seen || !Judges().empty();
  const EvalResult r = run.get();
  EXPECT_EQ(r.status, Status::kCompileError) << r.message;
  EXPECT_TRUE(seen) << "no judge ran while the candidate compiled";
  EXPECT_TRUE(Judges().empty()) << "the judge outlived the evaluation";
  // And a kernel that compiles is evaluated by that early judge as by any other.
  const EvalResult ok = cpu->Evaluate(task, task.starter_source, FastOptions());
  EXPECT_EQ(ok.status, Status::kOk) << ok.message;
  EXPECT_GT(ReferenceStartCpu(ok), 0.1) << "a spawned reference loads libtorch itself";
}

}  // namespace
}  // namespace kernelgym::testing
