// The runner's process plumbing and the symbol policy, on real processes and real shared objects
// (built here with the system g++, outside any sandbox: these are the runner's own inputs).
#include <gtest/gtest.h>
#include <signal.h>

#include "core/subprocess.h"
#include "eval_fixture.h"
#include "tpu_runner/cpu/symbol_policy.h"

namespace kernelgym::testing {
namespace {

namespace fs = std::filesystem;

SpawnOptions Shell(const std::string& script) {
  SpawnOptions options;
  options.argv = {"/bin/sh", "-c", script};
  options.env = {"PATH=/usr/bin:/bin"};
  return options;
}

TEST(SubprocessTest, ReportsExitCodeAndOutput) {
  const ProcessResult r = RunProcess(Shell("echo out; echo err >&2; exit 7"), 10);
  EXPECT_TRUE(r.started);
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.stdout_text, "out\n");
  EXPECT_EQ(r.stderr_text, "err\n");
  EXPECT_NE(r.Describe().find("exit 7"), std::string::npos);
}

TEST(SubprocessTest, NamesTheSignal) {
  const ProcessResult r = RunProcess(Shell("kill -SEGV $$"), 10);
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_NE(r.Describe().find("SIGSEGV"), std::string::npos) << r.Describe();
}

TEST(SubprocessTest, WallClockLimitKillsTheWholeProcessGroup) {
  // The grandchild would outlive a plain kill of the shell and keep the output pipe open.
  const auto start = std::chrono::steady_clock::now();
  const ProcessResult r = RunProcess(Shell("sleep 30 & sleep 30; wait"), 0.3);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(seconds, 5.0) << "the grandchild kept the run alive";
  EXPECT_NE(r.Describe(0.3).find("wall-clock limit"), std::string::npos) << r.Describe(0.3);
}

TEST(SubprocessTest, LimitsApplyToTheChild) {
  SpawnOptions options = Shell("ulimit -t; ulimit -n");
  options.limits.cpu_seconds = 7;
  options.limits.open_files = 33;
  const ProcessResult r = RunProcess(options, 10);
  EXPECT_EQ(r.stdout_text, "7\n33\n");
}

TEST(SubprocessTest, CapturedOutputIsBounded) {
  const ProcessResult r = RunProcess(Shell("head -c 5000000 /dev/zero"), 20);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_LE(r.stdout_text.size(), std::size_t{1} << 20);
}

TEST(SubprocessTest, AMissingProgramIsAnError) {
  SpawnOptions options;
  options.argv = {"/nonexistent/program"};
  const ProcessResult r = RunProcess(options, 5);
  EXPECT_FALSE(r.started);
  EXPECT_NE(r.error.find("/nonexistent/program"), std::string::npos) << r.error;
}

// Builds a shared object the way the compiler stage does (version script included, unless
// `hide` is false) and returns its path.
fs::path BuildSo(const std::string& name, const std::string& source, bool hide = true) {
  const fs::path& dir = TestTempDir();
  std::ofstream(dir / (name + ".cpp")) << source;
  std::ofstream(dir / "exports.map") << "{ global: kernel; local: *; };\n";
  const fs::path so = dir / (name + ".so");
  std::vector<std::string> argv{"/usr/bin/g++", "-std=c++20", "-O2", "-fPIC", "-shared", (dir / (name + ".cpp")).string(),
                                "-o", so.string()};
  if (hide) argv.push_back("-Wl,--version-script=" + (dir / "exports.map").string());
  SpawnOptions options;
  options.argv = argv;
  options.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  const ProcessResult r = RunProcess(options, 60);
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  return so;
}

TEST(SymbolPolicyTest, HonestKernelWithStdVectorPasses) {
  // std::vector pulls in operator new/delete, std::__throw_* (libstdc++), _Unwind_Resume
  // (libgcc_s) and instantiates std templates: all allowed.
  const fs::path so = BuildSo("vector", R"(
#include <cstdint>
#include <vector>
#include <cmath>
extern "C" void kernel(const float* x, float* y, int64_t n) {
  std::vector<float> tmp(x, x + n);
  for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(tmp[i]);
})");
  const SymbolCheckResult r = CheckSymbolPolicy(so, KernelPolicy{});
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(SymbolPolicyTest, ExtraExportsAreRejected) {
  const fs::path so = BuildSo("exports", "extern \"C\" void kernel() {}\nextern \"C\" int helper() { return 1; }\n", false);
  const SymbolCheckResult r = CheckSymbolPolicy(so, KernelPolicy{});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("helper"), std::string::npos) << r.message;
}

TEST(SymbolPolicyTest, MissingKernelIsRejected) {
  const fs::path so = BuildSo("nokernel", "extern \"C\" void kern() {}\n", false);
  const SymbolCheckResult r = CheckSymbolPolicy(so, KernelPolicy{});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("does not export `kernel`"), std::string::npos) << r.message;
}

TEST(SymbolPolicyTest, LibraryAllowlistIsTheTasks) {
  // erf comes from libm: allowed by default, refused when the task allows libc only.
  const fs::path so = BuildSo("libm", "#include <cmath>\nextern \"C\" double kernel(double x) { return std::erf(x); }\n");
  EXPECT_TRUE(CheckSymbolPolicy(so, KernelPolicy{}).ok);
  KernelPolicy libc_only;
  libc_only.allowed_libraries = {"libc"};
  const SymbolCheckResult r = CheckSymbolPolicy(so, libc_only);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("erf"), std::string::npos) << r.message;
}

TEST(SymbolPolicyTest, DenyListCoversThreadsAndLoading) {
  EXPECT_TRUE(IsDeniedImport("pthread_create"));
  EXPECT_TRUE(IsDeniedImport("dlsym"));
  EXPECT_TRUE(IsDeniedImport("_ZNSt6thread15_M_start_threadESt10unique_ptrINS_6_StateESt14default_deleteIS1_EEPFvvE"));
  EXPECT_FALSE(IsDeniedImport("memcpy"));
  EXPECT_FALSE(IsDeniedImport("expf"));
}

TEST(SymbolPolicyTest, RuntimeLibrariesAreFound) {
  for (const char* lib : {"libc", "libm", "libgomp", "libstdc++", "libgcc_s"})
    EXPECT_FALSE(LibraryExports(lib).empty()) << lib;
  EXPECT_TRUE(LibraryExports("libc").count("memcpy"));
}

}  // namespace
}  // namespace kernelgym::testing
