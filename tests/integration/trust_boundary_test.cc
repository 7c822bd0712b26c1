// The trust boundary of the cpu backend (docs/sandbox.md): which process holds what, checked on
// the real binaries and a real evaluation rather than assumed.
#include <gtest/gtest.h>

#include "core/subprocess.h"
#include "eval_fixture.h"
#include "tpu_runner/cpu/harness/layout.h"
#include "tpu_runner/cpu/harness_session.h"
#include "tpu_runner/sandbox.h"

namespace kernelgym::testing {
namespace {

namespace fs = std::filesystem;

fs::path Tool(const std::string& name) { return fs::path(DefaultBackendConfig().tools_dir) / name; }

std::string Readelf(const std::string& flags, const fs::path& binary) {
  SpawnOptions options;
  options.argv = {"/usr/bin/readelf", flags, binary.string()};
  options.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  const ProcessResult r = RunProcess(options, 30);
  EXPECT_EQ(r.exit_code, 0) << r.Describe(30) << r.stderr_text;
  return r.stdout_text;
}

std::vector<std::string> Needed(const fs::path& binary) {
  std::vector<std::string> out;
  std::istringstream lines(Readelf("-d", binary));
  for (std::string line; std::getline(lines, line);) {
    const auto open = line.find("Shared library: [");
    if (open != std::string::npos) out.push_back(line.substr(open + 17, line.find(']', open) - open - 17));
  }
  return out;
}

// The candidate's process: nothing a kernel could borrow, and no import slot it could rewrite.
TEST(TrustBoundaryTest, TheExecutorIsFullyRelroAndLinksOnlyTheCRuntime) {
  const fs::path executor = Tool("kernelgym-executor");
  ASSERT_TRUE(fs::exists(executor)) << executor;
  const std::string dynamic = Readelf("-d", executor);
  EXPECT_NE(dynamic.find("BIND_NOW"), std::string::npos) << dynamic;
  EXPECT_NE(dynamic.find("Flags: NOW PIE"), std::string::npos) << dynamic;
  EXPECT_NE(Readelf("-l", executor).find("GNU_RELRO"), std::string::npos);
  for (const std::string& lib : Needed(executor))
    EXPECT_TRUE(lib.rfind("libc.so", 0) == 0 || lib.rfind("libstdc++.so", 0) == 0 || lib.rfind("libgcc_s.so", 0) == 0 ||
                lib.rfind("libm.so", 0) == 0)
        << "the executor must not load " << lib;
}

// The judge holds the clock and reads the outputs: no libtorch (the reference has its own process).
TEST(TrustBoundaryTest, OnlyTheReferenceProcessLoadsLibtorch) {
  auto has_torch = [](const fs::path& binary) {
    for (const std::string& lib : Needed(binary))
      if (lib.find("torch") != std::string::npos || lib.find("blas") != std::string::npos) return true;
    return false;
  };
  EXPECT_FALSE(has_torch(Tool("kernelgym-harness")));
  EXPECT_FALSE(has_torch(Tool("kernelgym-executor")));
  EXPECT_TRUE(has_torch(Tool("kernelgym-reference")));
}

// Every evaluation says which protections held; on a machine where bwrap runs as root, all of them.
TEST(TrustBoundaryTest, AnEvaluationReportsItsProtections) {
  const Task* task = Tasks().Find("cpu/silu_mul");
  ASSERT_NE(task, nullptr);
  EvalOptions options = FastOptions();
  options.run_timing = false;
  const EvalResult r = Cpu().Evaluate(*task, task->starter_source, options);
  ASSERT_EQ(r.status, Status::kOk) << VerdictText(r);
  for (const char* name : {"seccomp", "seccomp_allow_list", "readonly_inputs", "output_guard_pages",
                           "separate_reference_process", "clock_outside_candidate", "keyed_inputs", "outputs_taken_at_done"})
    EXPECT_TRUE(r.protections.count(name) && r.protections.at(name)) << name;
  if (ProbeSandbox().bwrap && ProbeSandbox().root) {
    EXPECT_TRUE(r.protections.at("minimal_file_view"));
    EXPECT_TRUE(r.protections.at("unprivileged_uid"));
  }
  // Every checked size set ran: the task's trials on the timed sizes, two on each other set.
  EXPECT_EQ(r.correctness->trials_run, CorrectnessTrialCount(*task));
  EXPECT_EQ(CorrectnessTrialCount(*task), task->trials + 2 * static_cast<int>(task->check_sizes.size()));
}

TEST(FileLayoutTest, TensorsArePageAlignedAndEndAtTheirLastPage) {
  FileLayout layout;
  const uint64_t page = PageSize();
  const int a = layout.Add("a", 100, true);
  const int b = layout.Add("b", 3 * page + 8, false);
  const int c = layout.Add("c", 0, true);
  ASSERT_EQ(layout.buffers().size(), 3u);
  for (const BufferPlace& p : layout.buffers()) {
    EXPECT_EQ(p.file_offset % page, 0u) << p.name;
    EXPECT_EQ(p.span % page, 0u) << p.name;
    EXPECT_EQ(p.data_offset() % 64, 0u) << p.name;
    EXPECT_LE(p.lead + p.bytes, p.span) << p.name;
    EXPECT_LT(p.span - (p.lead + p.bytes), 64u) << p.name << ": a run past its end must reach the guard page";
  }
  EXPECT_EQ(layout.buffers()[a].span, page);
  EXPECT_EQ(layout.buffers()[b].span, 4 * page);
  EXPECT_EQ(layout.buffers()[b].file_offset, page);
  EXPECT_EQ(layout.buffers()[c].file_offset, 5 * page);
  EXPECT_EQ(layout.size(), 6 * page);
}

}  // namespace
}  // namespace kernelgym::testing
