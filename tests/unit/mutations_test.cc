// The search's source mutations: exact output of each operator on small kernels, the reduction and
// innermost-loop analyses, comments and strings left alone, idempotence, and — over every CPU
// starter — every mutant accepted by the real compiler (g++ -fopenmp -fsyntax-only).
#include "policies/search/mutations.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace kernelgym::search {
namespace {

namespace fs = std::filesystem;

std::vector<Mutation> Of(const std::string& source, const std::string& op) {
  std::vector<Mutation> out;
  for (Mutation& m : EnumerateMutations(source))
    if (m.op == op) out.push_back(std::move(m));
  return out;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct ShellRun {
  int status = -1;
  std::string output;
};

// Runs a shell command, capturing stdout and stderr together.
ShellRun Shell(const std::string& command) {
  ShellRun run;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return run;
  char buffer[4096];
  std::size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) run.output.append(buffer, n);
  const int raw = pclose(pipe);
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return run;
}

fs::path TempFile(const std::string& stem, const std::string& text) {
  static int counter = 0;
  const fs::path path = fs::temp_directory_path() /
                        ("kg_mutations_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + "_" + stem);
  std::ofstream(path) << text;
  return path;
}

const char* const kSum =
    "#include <cstdint>\n"
    "\n"
    "extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
    "    float sum = 0.0f;\n"
    "    for (int64_t i = 0; i < n; ++i)\n"
    "        sum += x[i];\n"
    "    y[0] = sum;\n"
    "}\n";

TEST(Mutations, OperatorsInContractOrder) {
  EXPECT_EQ(MutationOperators(),
            (std::vector<std::string>{"omp_simd", "unroll", "restrict", "exp_poly", "hoist_division", "parallel_for"}));
}

TEST(Mutations, OmpSimdAddsTheReductionItsBodyNeeds) {
  const auto m = Of(kSum, "omp_simd");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].description, "omp simd reduction(+:sum) on the loop at line 5");
  EXPECT_EQ(m[0].source,
            "#include <cstdint>\n"
            "\n"
            "extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
            "    float sum = 0.0f;\n"
            "    #pragma omp simd reduction(+:sum)\n"
            "    for (int64_t i = 0; i < n; ++i)\n"
            "        sum += x[i];\n"
            "    y[0] = sum;\n"
            "}\n");
}

// The pragma line of the omp_simd mutant of a one-loop function with `body` as the loop body.
std::string SimdPragma(const std::string& decls, const std::string& body) {
  const std::string src =
      "void f(const float* a, float* y, int n) {\n" + decls + "\nfor (int i = 0; i < n; ++i)\n" + body + "\n}\n";
  const auto m = Of(src, "omp_simd");
  if (m.empty()) return "(none)";
  const std::size_t at = m[0].source.find("#pragma");
  return m[0].source.substr(at, m[0].source.find('\n', at) - at);
}

TEST(Mutations, ReductionDetection) {
  EXPECT_EQ(SimdPragma("float s = 0;", "s += a[i];"), "#pragma omp simd reduction(+:s)");
  EXPECT_EQ(SimdPragma("float s = 0;", "{ s -= a[i] * 2.0f; }"), "#pragma omp simd reduction(+:s)");
  EXPECT_EQ(SimdPragma("double p = 1;", "p *= a[i];"), "#pragma omp simd reduction(*:p)");
  EXPECT_EQ(SimdPragma("float m = a[0];", "m = a[i] > m ? a[i] : m;"), "#pragma omp simd reduction(max:m)");
  EXPECT_EQ(SimdPragma("float m = a[0];", "m = (m < a[i]) ? a[i] : m;"), "#pragma omp simd reduction(max:m)");
  EXPECT_EQ(SimdPragma("float m = a[0];", "m = a[i] < m ? a[i] : m;"), "#pragma omp simd reduction(min:m)");
  EXPECT_EQ(SimdPragma("float m = a[0];", "m = std::max(m, a[i]);"), "#pragma omp simd reduction(max:m)");
  EXPECT_EQ(SimdPragma("float m = a[0];", "m = fmaxf(a[i] * 2.0f, m);"), "#pragma omp simd reduction(max:m)");
  EXPECT_EQ(SimdPragma("float m = a[0];", "m = std::fmin(m, a[i]);"), "#pragma omp simd reduction(min:m)");
  EXPECT_EQ(SimdPragma("float m = a[0];", "if (a[i] > m) m = a[i];"), "#pragma omp simd reduction(max:m)");
  EXPECT_EQ(SimdPragma("float m = a[0];", "if (a[i] < m) { m = a[i]; }"), "#pragma omp simd reduction(min:m)");
  EXPECT_EQ(SimdPragma("float s = 0;\nfloat m = 0;", "{ s += a[i]; m = std::max(m, a[i]); }"),
            "#pragma omp simd reduction(+:s) reduction(max:m)");
  // An array element update is not a reduction.
  EXPECT_EQ(SimdPragma("", "y[i] += a[i];"), "#pragma omp simd");
  EXPECT_EQ(SimdPragma("float s = 0;", "y[0] += a[i] * s;"), "#pragma omp simd");
  // A scalar declared in the body is private to the iteration.
  EXPECT_EQ(SimdPragma("", "{ float t = a[i]; t += 1.0f; y[i] = t; }"), "#pragma omp simd");
  // Loop-carried writes that no clause fixes: no mutant at all.
  EXPECT_EQ(SimdPragma("float last = 0;", "last = a[i];"), "(none)");
  EXPECT_EQ(SimdPragma("float s = 0;", "{ s += a[i]; y[i] = s; }"), "(none)");  // a prefix sum
  EXPECT_EQ(SimdPragma("float s = 0;", "{ s += a[i]; s *= 2.0f; }"), "(none)");
  EXPECT_EQ(SimdPragma("", "if (a[i] < 0) break;"), "(none)");
  EXPECT_EQ(SimdPragma("", "if (a[i] < 0) return;"), "(none)");
  EXPECT_EQ(SimdPragma("", "for (int j = 0; j < n; ++j) if (a[j] < 0) break;"), "#pragma omp simd");
}

TEST(Mutations, UnrollOnlyInnermostLoopsFourThenEight) {
  const std::string src =
      "void f(float* y, int n) {\n"
      "  for (int i = 0; i < n; ++i) {\n"
      "    for (int j = 0; j < n; ++j) y[i * n + j] = 0;\n"
      "  }\n"
      "}\n";
  const auto m = Of(src, "unroll");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0].description, "GCC unroll 4 on the loop at line 3");
  EXPECT_EQ(m[1].description, "GCC unroll 8 on the loop at line 3");
  EXPECT_EQ(m[0].source,
            "void f(float* y, int n) {\n"
            "  for (int i = 0; i < n; ++i) {\n"
            "    #pragma GCC unroll 4\n"
            "    for (int j = 0; j < n; ++j) y[i * n + j] = 0;\n"
            "  }\n"
            "}\n");
  EXPECT_NE(m[1].source.find("    #pragma GCC unroll 8\n    for (int j"), std::string::npos);
  // GCC refuses to unroll a loop without a condition.
  EXPECT_TRUE(Of("void f() {\n  for (;;) {}\n}\n", "unroll").empty());
}

TEST(Mutations, NoPragmaWhereOneIsAlready) {
  const std::string src =
      "void f(float* y, int n) {\n"
      "#pragma omp parallel for\n"
      "  for (int i = 0; i < n; ++i) y[i] = 0;\n"
      "}\n";
  EXPECT_TRUE(Of(src, "omp_simd").empty());
  EXPECT_TRUE(Of(src, "unroll").empty());
  EXPECT_TRUE(Of(src, "parallel_for").empty());
}

TEST(Mutations, RestrictOnEveryPointerParameterOnce) {
  const std::string src =
      "#include <cstdint>\n"
      "static void helper(float* p) { p[0] = 0; }\n"
      "extern \"C\" void kernel(const float* x, float *y, float* __restrict z, int64_t n) {\n"
      "    helper(y);\n"
      "}\n";
  const auto m = Of(src, "restrict");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].description, "__restrict on the kernel's pointer parameters");
  EXPECT_EQ(m[0].source,
            "#include <cstdint>\n"
            "static void helper(float* p) { p[0] = 0; }\n"
            "extern \"C\" void kernel(const float* __restrict x, float * __restrict y, float* __restrict z, "
            "int64_t n) {\n"
            "    helper(y);\n"
            "}\n");
  EXPECT_TRUE(Of(m[0].source, "restrict").empty());  // idempotent: nothing left to add
  EXPECT_TRUE(Of("extern \"C\" { void k(float* __restrict__ a) { a[0] = 1; } }", "restrict").empty());
  EXPECT_EQ(Of("extern \"C\" { void k(float* a) { a[0] = 1; } }", "restrict").at(0).source,
            "extern \"C\" { void k(float* __restrict a) { a[0] = 1; } }");
}

TEST(Mutations, ExpPolyReplacesEveryLibmExpOnce) {
  const std::string src =
      "#include <cmath>\n"
      "\n"
      "// exp(x) in a comment stays\n"
      "extern \"C\" void kernel(const float* x, float* y, int n) {\n"
      "    const char* note = \"std::exp(x)\";\n"
      "    (void)note;\n"
      "    for (int i = 0; i < n; ++i)\n"
      "        y[i] = std::exp(x[i]) + expf(x[i]) + exp(1.0f) + std::expm1(x[i]) + exp2f(x[i]);\n"
      "}\n";
  const auto m = Of(src, "exp_poly");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].description, "polynomial exp instead of the libm call (3 calls)");
  const std::string& out = m[0].source;
  EXPECT_EQ(out.rfind("#include <cmath>\n#include <cstring>\n\n// Added by the exp_poly mutation", 0), 0u);
  EXPECT_NE(out.find("static inline float kg_exp_poly(float v) {"), std::string::npos);
  EXPECT_NE(out.find("y[i] = kg_exp_poly(x[i]) + kg_exp_poly(x[i]) + kg_exp_poly(1.0f) + std::expm1(x[i]) + "
                     "exp2f(x[i]);"),
            std::string::npos);
  EXPECT_NE(out.find("// exp(x) in a comment stays"), std::string::npos);
  EXPECT_NE(out.find("\"std::exp(x)\""), std::string::npos);
  EXPECT_EQ(out.find("floorf"), std::string::npos);
  EXPECT_NE(out.find("12582912.0f"), std::string::npos);  // 1.5 * 2^23 rounding
  EXPECT_NE(out.find("std::memcpy"), std::string::npos);
  EXPECT_TRUE(Of(out, "exp_poly").empty());  // not applied twice
  // <cstring> already there: not added again.
  const auto again = Of("#include <cstring>\nfloat f(float v) { return std::exp(v); }\n", "exp_poly");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].description, "polynomial exp instead of the libm call (1 call)");
  EXPECT_EQ(again[0].source.find("#include <cstring>", 1), std::string::npos);
}

// The polynomial is a real exp: compiled and run, it is within a few float ulps of libm's double exp.
TEST(Mutations, ExpPolyIsAccurate) {
  const std::string src =
      "#include <cmath>\n"
      "#include <cstdio>\n"
      "float under_test(float v) { return std::exp(v); }\n";
  const auto m = Of(src, "exp_poly");
  ASSERT_EQ(m.size(), 1u);
  const std::string program =
      m[0].source +
      "int main() {\n"
      "  double worst = 0;\n"
      "  for (float v = -87.0f; v <= 88.0f; v += 0.0137f) {\n"
      "    const double want = std::pow(2.718281828459045, (double)v);\n"
      "    const double err = std::fabs(under_test(v) - want) / want;\n"
      "    if (err > worst) worst = err;\n"
      "  }\n"
      "  std::printf(\"%g\\n\", worst);\n"
      "  return worst < 5e-7 && under_test(1.0f) > 2.718f && under_test(1.0f) < 2.7183f ? 0 : 1;\n"
      "}\n";
  const fs::path cc = TempFile("exp.cc", program), exe = cc.string() + ".out";
  const ShellRun build = Shell("g++ -std=c++17 -O2 -march=native " + cc.string() + " -o " + exe.string());
  ASSERT_EQ(build.status, 0) << build.output << program;
  const ShellRun run = Shell(exe.string());
  EXPECT_EQ(run.status, 0) << "worst relative error: " << run.output;
  fs::remove(cc);
  fs::remove(exe);
}

TEST(Mutations, HoistDivisionOfAFloatInvariant) {
  const std::string src =
      "void f(const float* x, float* y, int n, float s, int k) {\n"
      "    float t = s * 2.0f;\n"
      "    for (int i = 0; i < n; ++i) {\n"
      "        y[i] = x[i] / s + x[i] / t;\n"
      "        y[i] += x[i] / k + x[i] / (s + 1.0f);\n"
      "        y[i] /= s;\n"
      "        y[i] /= s + 1.0f;\n"
      "    }\n"
      "}\n";
  const auto m = Of(src, "hoist_division");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].description, "reciprocals of s, t hoisted out of the loop at line 3");
  EXPECT_EQ(m[0].source,
            "void f(const float* x, float* y, int n, float s, int k) {\n"
            "    float t = s * 2.0f;\n"
            "    const float kg_inv_s = 1.0f / s;\n"
            "    const float kg_inv_t = 1.0f / t;\n"
            "    for (int i = 0; i < n; ++i) {\n"
            "        y[i] = x[i] * kg_inv_s + x[i] * kg_inv_t;\n"
            "        y[i] += x[i] / k + x[i] / (s + 1.0f);\n"
            "        y[i] *= kg_inv_s;\n"
            "        y[i] /= s + 1.0f;\n"
            "    }\n"
            "}\n");
  // Assigned in the loop, or the loop is another statement's body: left alone.
  EXPECT_TRUE(Of("void f(float* y, int n, float s) {\n  for (int i = 0; i < n; ++i) { s += 1; y[i] /= 2; y[i] = y[i] / "
                 "s; }\n}\n",
                 "hoist_division")
                  .empty());
  EXPECT_TRUE(Of("void f(float* y, int n, float s) {\n  if (n)\n    for (int i = 0; i < n; ++i) y[i] = y[i] / s;\n}\n",
                 "hoist_division")
                  .empty());
}

TEST(Mutations, ParallelForOnOutermostKernelLoops) {
  const std::string src =
      "static void helper(float* y, int n) {\n"
      "    for (int i = 0; i < n; ++i) y[i] = 0;\n"
      "}\n"
      "extern \"C\" void kernel(const float* x, float* y, int n) {\n"
      "    float scratch[4];\n"
      "    for (int r = 0; r < n; ++r)\n"
      "        for (int c = 0; c < n; ++c) y[r * n + c] = x[c];\n"
      "    for (int r = 0; r < n; ++r) { scratch[0] = x[r]; y[r] += scratch[0]; }\n"
      "}\n";
  const auto m = Of(src, "parallel_for");
  ASSERT_EQ(m.size(), 1u);  // not the helper's loop, not the inner loop, not the one sharing scratch[]
  EXPECT_EQ(m[0].description, "omp parallel for on the loop at line 6");
  EXPECT_NE(m[0].source.find("    float scratch[4];\n"
                             "    #pragma omp parallel for\n"
                             "    for (int r = 0; r < n; ++r)\n"
                             "        for (int c = 0;"),
            std::string::npos)
      << m[0].source;
}

TEST(Mutations, CommentsAndStringsAreNotSites) {
  const std::string src =
      "// for (int i = 0; i < n; ++i) x += std::exp(i);\n"
      "/* for (int j = 0; j < 4; ++j) {} */\n"
      "const char* kLoop = \"for (int k = 0; k < 8; ++k) exp(k);\";\n"
      "const char* kRaw = R\"x(for (int q = 0; q < 2; ++q) expf(q);)x\";\n"
      "char quote = '\"';\n";
  EXPECT_TRUE(EnumerateMutations(src).empty());
}

TEST(Mutations, NoMutantEqualsTheInputOrAnother) {
  const std::string src = kSum;
  const auto all = EnumerateMutations(src);
  std::set<std::string> sources;
  for (const Mutation& m : all) {
    EXPECT_NE(m.source, src) << m.description;
    EXPECT_TRUE(sources.insert(m.source).second) << "duplicate: " << m.description;
  }
  // Grouped by operator, in the contract's order.
  std::size_t last = 0;
  for (const Mutation& m : all) {
    const auto& ops = MutationOperators();
    const std::size_t at = static_cast<std::size_t>(std::find(ops.begin(), ops.end(), m.op) - ops.begin());
    ASSERT_LT(at, ops.size()) << m.op;
    EXPECT_GE(at, last);
    last = at;
  }
}

// Conformance over the CPU suite: the mutants each starter yields, and every one of them compiles.
const fs::path kCpuSuite = fs::path(KERNELGYM_SOURCE_DIR) / "datasets/suites/cpu";

const std::string kSyntaxCheck = "g++ -std=c++17 -O2 -fopenmp -march=native -fsyntax-only -Wall ";

class StarterMutations : public ::testing::TestWithParam<std::string> {};

TEST_P(StarterMutations, EveryMutantCompiles) {
  const std::string source = ReadFile(kCpuSuite / GetParam() / "starter.cpp");
  ASSERT_FALSE(source.empty());
  const auto mutants = EnumerateMutations(source);
  ASSERT_FALSE(mutants.empty());
  // The check is real: the same command rejects a broken copy of the starter.
  const fs::path broken = TempFile(GetParam() + "_broken.cc",
                                   source + "\n#pragma omp simd reduction(+:nowhere)\nint f() { for (;;) {} }\n");
  EXPECT_NE(Shell(kSyntaxCheck + broken.string()).status, 0);
  fs::remove(broken);
  for (const Mutation& m : mutants) {
    const fs::path file = TempFile(GetParam() + ".cc", m.source);
    const ShellRun run = Shell(kSyntaxCheck + file.string());
    EXPECT_EQ(run.status, 0) << GetParam() << ": " << m.op << " (" << m.description << ")\n"
                             << run.output << "\n--- mutant ---\n"
                             << m.source;
    fs::remove(file);
  }
}

std::vector<std::string> CpuStarters() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kCpuSuite))
    if (fs::exists(entry.path() / "starter.cpp")) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(CpuSuite, StarterMutations, ::testing::ValuesIn(CpuStarters()),
                         [](const auto& info) { return info.param; });

// What the operators find in the shipped starters (per operator), so an analysis change that
// loses or invents sites shows up here.
TEST(StarterMutationCounts, MatchTheStartersStructure) {
  const std::map<std::string, std::map<std::string, int>> expected = {
      {"attention", {{"omp_simd", 9}, {"unroll", 10}, {"restrict", 1}, {"exp_poly", 1}}},
      {"conv2d", {{"omp_simd", 7}, {"unroll", 2}, {"restrict", 1}, {"parallel_for", 1}}},
      {"gemm_bias_relu", {{"omp_simd", 3}, {"unroll", 2}, {"restrict", 1}, {"parallel_for", 1}}},
      {"rms_norm", {{"omp_simd", 3}, {"unroll", 4}, {"restrict", 1}, {"parallel_for", 1}}},
      {"silu_mul", {{"omp_simd", 1}, {"unroll", 2}, {"restrict", 1}, {"exp_poly", 1}, {"parallel_for", 1}}},
      {"softmax_rows",
       {{"omp_simd", 4}, {"unroll", 6}, {"restrict", 1}, {"exp_poly", 1}, {"hoist_division", 1}, {"parallel_for", 1}}},
  };
  for (const auto& [name, counts] : expected) {
    const std::string source = ReadFile(kCpuSuite / name / "starter.cpp");
    ASSERT_FALSE(source.empty()) << name;
    std::map<std::string, int> got;
    for (const Mutation& m : EnumerateMutations(source)) ++got[m.op];
    EXPECT_EQ(got, counts) << name;
  }
  // The descriptions name the right loops (softmax_rows: max at line 10, exp + sum at 13, divide at 18).
  std::vector<std::string> descriptions;
  for (const Mutation& m : EnumerateMutations(ReadFile(kCpuSuite / "softmax_rows/starter.cpp")))
    descriptions.push_back(m.description);
  for (const char* want :
       {"omp simd reduction(max:m) on the loop at line 10", "omp simd reduction(+:sum) on the loop at line 13",
        "reciprocal of sum hoisted out of the loop at line 18", "omp parallel for on the loop at line 6"})
    EXPECT_NE(std::find(descriptions.begin(), descriptions.end(), want), descriptions.end()) << want;
}

}  // namespace
}  // namespace kernelgym::search
