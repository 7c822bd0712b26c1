// Stage 1, the text check of a candidate's source (tpu_runner/cpu/static_check.h): allowed includes
// pass; every way of writing a forbidden include is rejected at the line the author wrote it;
// includes inside comments and string literals are ignored.
#include "tpu_runner/cpu/static_check.h"

#include <gtest/gtest.h>

#include <string>

#include "datasets/suite.h"

namespace kernelgym {
namespace {

const KernelPolicy kDefaultPolicy{};

::testing::AssertionResult Accepted(const std::string& source, const KernelPolicy& policy = kDefaultPolicy) {
  const StaticCheckResult r = CheckSource(source, policy);
  if (r.ok && r.message.empty() && r.diagnostics.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "rejected: " << r.message << "\nsource:\n" << source;
}

// Rejected, and the first problem is at `line` with a message containing `what`.
::testing::AssertionResult RejectedAt(const std::string& source, int line, const std::string& what,
                                      const KernelPolicy& policy = kDefaultPolicy) {
  const StaticCheckResult r = CheckSource(source, policy);
  if (r.ok) return ::testing::AssertionFailure() << "accepted:\n" << source;
  if (r.diagnostics.empty()) return ::testing::AssertionFailure() << "no diagnostics for: " << r.message;
  const Diagnostic& d = r.diagnostics.front();
  const std::string prefix = "line " + std::to_string(line) + ": ";
  if (r.message.rfind(prefix, 0) != 0)
    return ::testing::AssertionFailure() << "message '" << r.message << "' does not start with '" << prefix << "'";
  if (d.line != line) return ::testing::AssertionFailure() << "diagnostic line " << d.line << ", wanted " << line;
  if (d.file != "kernel.cpp" || d.severity != "error")
    return ::testing::AssertionFailure() << "diagnostic " << d.file << " " << d.severity;
  if (r.message.find(what) == std::string::npos || d.message.find(what) == std::string::npos)
    return ::testing::AssertionFailure() << "message '" << r.message << "' lacks '" << what << "'";
  return ::testing::AssertionSuccess();
}

const char* kKernelBody =
    "extern \"C\" void kernel(const float* x, float* y, int64_t n) {\n"
    "  for (int64_t i = 0; i < n; ++i) y[i] = std::sqrt(x[i]);\n"
    "}\n";

// ---------------------------------------------------------------------------------------------
// Allowed.

TEST(StaticCheck, EveryDefaultHeaderIsAllowed) {
  std::string source;
  for (const std::string& h : DefaultAllowedHeaders()) source += "#include <" + h + ">\n";
  source += kKernelBody;
  EXPECT_TRUE(Accepted(source));
  for (const std::string& h : DefaultAllowedHeaders()) EXPECT_TRUE(IsAllowedHeader(h, kDefaultPolicy)) << h;
}

TEST(StaticCheck, DefaultSetHasTheBasicsAndNoDangerousHeaders) {
  for (const char* h : {"cmath", "cstdint", "immintrin.h", "omp.h", "algorithm", "vector"})
    EXPECT_TRUE(IsAllowedHeader(h, kDefaultPolicy)) << h;
  for (const char* h : {"thread", "fstream", "iostream", "cstdio", "stdio.h", "dlfcn.h", "unistd.h", "chrono", "ctime",
                        "sys/syscall.h", "pthread.h", "mutex", "atomic", "future", "filesystem", "random"})
    EXPECT_FALSE(IsAllowedHeader(h, kDefaultPolicy)) << h;
}

TEST(StaticCheck, CommonSpellingsOfAllowedIncludes) {
  EXPECT_TRUE(Accepted(std::string("#include <cmath>\n#include <cstdint>\n") + kKernelBody));
  EXPECT_TRUE(Accepted(std::string("#include<cmath>\n#include \"cstdint\"\n") + kKernelBody));
  EXPECT_TRUE(Accepted(std::string("  #  include   <cmath>   // for sqrt\n#\tinclude <cstdint>\n") + kKernelBody));
  EXPECT_TRUE(
      Accepted(std::string("#include <cmath> /* sqrt */\n#include <omp.h>\n#include <immintrin.h>\n") + kKernelBody));
  EXPECT_TRUE(Accepted(std::string("#include <cmath>\r\n#include <cstdint>\r\n") + kKernelBody));
  // Other directives are none of the check's business.
  EXPECT_TRUE(Accepted("#pragma once\n#define N 4\n#if N > 2\n#include <cmath>\n#endif\n#pragma omp declare simd\n"));
  EXPECT_TRUE(Accepted(""));
}

TEST(StaticCheck, PolicyExtraHeadersAreAllowed) {
  const std::string source = "#include <random>\n#include <cmath>\n";
  EXPECT_TRUE(RejectedAt(source, 1, "<random>"));
  KernelPolicy policy;
  policy.extra_allowed_headers = {"random"};
  EXPECT_TRUE(Accepted(source, policy));
  EXPECT_TRUE(IsAllowedHeader("random", policy));
  EXPECT_FALSE(IsAllowedHeader("thread", policy));
  // The rejection message lists what is allowed, extra headers included.
  const StaticCheckResult r = CheckSource("#include <thread>\n", policy);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.message.find("random"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("cmath"), std::string::npos) << r.message;
}

TEST(StaticCheck, BundledStartersPass) {
  const TaskRegistry registry = TaskRegistry::LoadFrom(DefaultSuitesRoot());
  ASSERT_FALSE(registry.All().empty());
  for (const Task* task : registry.All()) EXPECT_TRUE(Accepted(task->starter_source, task->policy)) << task->id;
}

// ---------------------------------------------------------------------------------------------
// Rejected, at the right line.

TEST(StaticCheck, DisallowedHeadersAreRejectedAtTheirLine) {
  EXPECT_TRUE(RejectedAt("#include <cmath>\n#include <cstdint>\n#include <thread>\n", 3, "<thread>"));
  EXPECT_TRUE(RejectedAt("#include <fstream>\n", 1, "<fstream>"));
  EXPECT_TRUE(RejectedAt("#include <cmath>\n\n\n\n#include <dlfcn.h>\n", 5, "<dlfcn.h>"));
  EXPECT_TRUE(RejectedAt("#include \"unistd.h\"\n", 1, "<unistd.h>"));
  EXPECT_TRUE(RejectedAt(std::string(kKernelBody) + "#include <sys/syscall.h>\n", 4, "<sys/syscall.h>"));
  EXPECT_TRUE(RejectedAt("#include <CMATH>\n", 1, "<CMATH>"));  // names are exact
}

TEST(StaticCheck, EveryProblemIsReportedAndTheFirstIsTheMessage) {
  const StaticCheckResult r =
      CheckSource("#include <thread>\n#include <cmath>\n#include <fstream>\n#include_next <cmath>\n", kDefaultPolicy);
  ASSERT_FALSE(r.ok);
  ASSERT_EQ(r.diagnostics.size(), 3u);
  EXPECT_EQ(r.diagnostics[0].line, 1);
  EXPECT_EQ(r.diagnostics[1].line, 3);
  EXPECT_EQ(r.diagnostics[2].line, 4);
  EXPECT_EQ(r.message.rfind("line 1: ", 0), 0u) << r.message;
  EXPECT_NE(r.diagnostics[1].message.find("<fstream>"), std::string::npos);
  EXPECT_NE(r.diagnostics[2].message.find("include_next"), std::string::npos);
}

TEST(StaticCheck, AbsolutePathsAreRejected) {
  EXPECT_TRUE(RejectedAt("#include \"/usr/include/c++/12/cmath\"\n", 1, "absolute"));
  EXPECT_TRUE(RejectedAt("#include <cmath>\n#include </etc/passwd>\n", 2, "/etc/passwd"));
}

TEST(StaticCheck, ParentPathsAreRejected) {
  EXPECT_TRUE(RejectedAt("#include \"../secret.h\"\n", 1, "parent"));
  EXPECT_TRUE(RejectedAt("#include <cmath>\n#include <bits/../thread>\n", 2, "bits/../thread"));
  EXPECT_TRUE(RejectedAt("#include \"..\"\n", 1, "parent"));
}

TEST(StaticCheck, EmptyIncludeIsRejected) {
  EXPECT_TRUE(RejectedAt("#include <>\n", 1, "include"));
  EXPECT_TRUE(RejectedAt("#include \"\"\n", 1, "include"));
}

TEST(StaticCheck, MacroComputedIncludesAreRejected) {
  EXPECT_TRUE(RejectedAt("#define HDR <thread>\n#include HDR\n", 2, "computed"));
  // Even when the macro names an allowed header: the text check cannot follow macros.
  EXPECT_TRUE(RejectedAt("#define HDR <cmath>\n#include HDR\n", 2, "computed"));
  EXPECT_TRUE(RejectedAt("#define STR(x) #x\n#define XSTR(x) STR(x)\n#include XSTR(thread)\n", 3, "computed"));
  EXPECT_TRUE(RejectedAt("#include\n", 1, "computed"));
  EXPECT_TRUE(RejectedAt("#include <cmath\n", 1, "computed"));
}

TEST(StaticCheck, DigraphAndTrigraphIncludesAreRejected) {
  EXPECT_TRUE(RejectedAt("#include <cmath>\n%:include <thread>\n", 2, "<thread>"));
  EXPECT_TRUE(RejectedAt("  %:  include <fstream>\n", 1, "<fstream>"));
  EXPECT_TRUE(RejectedAt("?\?=include <thread>\n", 1, "<thread>"));
  EXPECT_TRUE(RejectedAt("%:include_next <cmath>\n", 1, "include_next"));
}

TEST(StaticCheck, IncludeNextImportAndEmbedAreRejected) {
  EXPECT_TRUE(RejectedAt("#include <cmath>\n#include_next <cmath>\n", 2, "#include_next"));
  EXPECT_TRUE(RejectedAt("#import <cmath>\n", 1, "#import"));
  EXPECT_TRUE(RejectedAt("#include <cmath>\n\n#embed \"data.bin\"\n", 3, "#embed"));
}

TEST(StaticCheck, IncludesHiddenBehindLineSplicesAreRejected) {
  // The directive is reported at the line where it starts.
  EXPECT_TRUE(RejectedAt("#inc\\\nlude <thread>\n", 1, "<thread>"));
  EXPECT_TRUE(RejectedAt("#include <cmath>\n#include \\\n<fstream>\n", 2, "<fstream>"));
  EXPECT_TRUE(RejectedAt("#include <thr\\\nead>\n", 1, "<thread>"));
  EXPECT_TRUE(RejectedAt("#\\\ni\\\nn\\\nclude <dlfcn.h>\n", 1, "<dlfcn.h>"));
  // Lines after a splice keep their numbers.
  EXPECT_TRUE(RejectedAt("#define A 1 + \\\n  2\n#include <thread>\n", 3, "<thread>"));
}

TEST(StaticCheck, IncludesHiddenBehindBlockCommentsAreRejected) {
  EXPECT_TRUE(RejectedAt("#/* hidden */include <thread>\n", 1, "<thread>"));
  EXPECT_TRUE(RejectedAt("#include <cmath>\n/**/#/**/include/**/<fstream>\n", 2, "<fstream>"));
  EXPECT_TRUE(RejectedAt("%:/* x */include <thread>\n", 1, "<thread>"));
  EXPECT_TRUE(RejectedAt("#/* x */import <cmath>\n", 1, "#import"));
  // A comment the author closed: what follows on the next lines is code again.
  EXPECT_TRUE(RejectedAt("/* one\n   two\n   three */\n#include <thread>\n", 4, "<thread>"));
  EXPECT_TRUE(RejectedAt("/* a */ int x; /* b\n */\n#include <thread>\n", 3, "<thread>"));
}

TEST(StaticCheck, StringLiteralsDoNotOpenComments) {
  // "/*" inside a string does not start a comment, so the include after it is seen.
  EXPECT_TRUE(RejectedAt("const char* s = \"/*\";\n#include <thread>\n// */\n", 2, "<thread>"));
  EXPECT_TRUE(RejectedAt("const char c = '\"'; const char* s = \"/*\";\n#include <thread>\n", 2, "<thread>"));
  EXPECT_TRUE(RejectedAt("const char* s = \"\\\"/*\";\n#include <fstream>\n", 2, "<fstream>"));
}

TEST(StaticCheck, IncludesInCommentsAreIgnored) {
  EXPECT_TRUE(Accepted("// #include <thread>\n#include <cmath>\n"));
  EXPECT_TRUE(Accepted("/* #include <thread> */\n#include <cmath>\n"));
  EXPECT_TRUE(Accepted("#include <cmath> // #include <fstream>\n"));
  EXPECT_TRUE(Accepted("/*\n#include <thread>\n#include <fstream>\n*/\n#include <cmath>\n"));
  EXPECT_TRUE(Accepted("/* x\n * #include <dlfcn.h>\n */ int y;\n"));
  EXPECT_TRUE(Accepted("#include <cmath> /* begin\n#include <thread>\n end */\n"));
}

TEST(StaticCheck, IncludesInStringLiteralsAreIgnored) {
  EXPECT_TRUE(Accepted("const char* s = \"#include <thread>\";\n"));
  EXPECT_TRUE(Accepted("const char* s = \"x\\\"#include <thread>\";\n"));
  EXPECT_TRUE(Accepted("#define MSG \"#include <fstream>\"\n"));
  EXPECT_TRUE(Accepted("const char c = '#'; const char* t = \"include <thread>\";\n"));
}

TEST(StaticCheck, OversizedSourceIsRejected) {
  std::string source = std::string(kKernelBody);
  source += "// " + std::string(kMaxSourceBytes - source.size() - 4, 'x') + "\n";
  ASSERT_EQ(source.size(), kMaxSourceBytes);
  EXPECT_TRUE(Accepted(source));
  source += "\n";
  const StaticCheckResult r = CheckSource(source, kDefaultPolicy);
  EXPECT_FALSE(r.ok);
  ASSERT_EQ(r.diagnostics.size(), 1u);
  EXPECT_EQ(r.diagnostics[0].line, 1);
  EXPECT_NE(r.message.find(std::to_string(kMaxSourceBytes + 1)), std::string::npos) << r.message;
  EXPECT_NE(r.message.find(std::to_string(kMaxSourceBytes)), std::string::npos) << r.message;
}

TEST(StaticCheck, NulByteIsRejected) {
  std::string source = "#include <cmath>\n";
  source.push_back('\0');
  source += "int x;\n";
  EXPECT_TRUE(RejectedAt(source, 1, "NUL"));
}

// ---------------------------------------------------------------------------------------------
// Lexing corner cases: the text check must see exactly the directives the preprocessor sees
// (the compiler's -H include trace re-checks them, but the text check must neither miss a real
// include nor reject one hidden in a comment or literal).

TEST(StaticCheck, RawStringDoesNotHideAnInclude) {
  EXPECT_TRUE(RejectedAt("const char* s = R\"x( \" /* )x\";\n#include <thread>\n// */\n", 2, "<thread>"));
}

TEST(StaticCheck, DigitSeparatorDoesNotHideAnInclude) {
  EXPECT_TRUE(RejectedAt("int a = 1'0; const char* s = \"'/*\";\n#include <thread>\n// */\n", 2, "<thread>"));
}

TEST(StaticCheck, BackslashSpaceNewlineSpliceIsSeen) {
  EXPECT_TRUE(RejectedAt("#inc\\ \nlude <thread>\n", 1, "<thread>"));
  EXPECT_TRUE(RejectedAt("#include <cmath>\n#include \\\t\n<fstream>\n", 2, "<fstream>"));
}

TEST(StaticCheck, Utf8ByteOrderMarkDoesNotHideAnInclude) {
  EXPECT_TRUE(RejectedAt("\xEF\xBB\xBF#include <thread>\n", 1, "<thread>"));
}

TEST(StaticCheck, DirectiveIsReportedAtTheLineOfItsHash) {
  EXPECT_TRUE(RejectedAt("/* a\n b */ #include <thread>\n", 2, "<thread>"));
  EXPECT_TRUE(RejectedAt("#include <cmath>\n\\\n#include <thread>\n", 3, "<thread>"));
}

TEST(StaticCheck, LineCommentContinuedBySpliceIsStillAComment) {
  EXPECT_TRUE(Accepted("// c \\\n#include <thread>\nint x;\n"));
}

TEST(StaticCheck, MultiLineRawStringContentIsIgnored) {
  EXPECT_TRUE(Accepted("const char* s = R\"(\n#include <thread>\n)\";\n"));
}

TEST(StaticCheck, DigitSeparatorDoesNotSwallowACommentStart) {
  EXPECT_TRUE(Accepted("int a = 1'000; /* start\n#include <thread>\n*/\n"));
}

// The compiler's assembly output: inline assembly that reads a file or builds directives from
// text is found however it is written; symbols and strings that merely contain the words are not.
TEST(AssemblerFileDirective, FindsFileReadingAndTextBuildingDirectives) {
  EXPECT_EQ(AssemblerFileDirective("#APP\n\t.incbin \"/usr/lib/libblas.so.3\"\n#NO_APP\n"), ".incbin");
  EXPECT_EQ(AssemblerFileDirective("blob: .INCBIN \"x\""), ".incbin");
  EXPECT_EQ(AssemblerFileDirective("nop; .include \"a.s\""), ".include");
  EXPECT_EQ(AssemblerFileDirective("\t.macro take s, p\n .in\\s \"\\p\"\n.endm"), ".macro");
  EXPECT_EQ(AssemblerFileDirective(".irpc c, cbin\n"), ".irpc");
  EXPECT_EQ(AssemblerFileDirective(".irp s, incbin\n"), ".irp");
  EXPECT_EQ(AssemblerFileDirective("x:.incbin\"y\""), ".incbin");
}

TEST(AssemblerFileDirective, IgnoresWhatGccEmitsForOrdinaryKernels) {
  EXPECT_EQ(AssemblerFileDirective("\t.globl\tkernel\n\t.type\tkernel, @function\nkernel:\n\tvmovups (%rdi), %ymm0\n"
                                   "\t.section .rodata.include_bias\n.LC0:\n\t.string \"macro.incbinary\"\n"
                                   "\tcall\tmacro_kernel\n\t.ident \"GCC\"\n"),
            "");
  EXPECT_EQ(AssemblerFileDirective(".incbinary .includes .macros .irpx"), "");
}

}  // namespace
}  // namespace kernelgym
