#include "tpu_runner/cpu/compiler.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/digest.h"
#include "core/subprocess.h"
#include "core/text_safety.h"
#include "tpu_runner/diagnostics.h"
#include "tpu_runner/machine.h"
#include "tpu_runner/sandbox.h"
#include "tpu_runner/cpu/static_check.h"

namespace kernelgym {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSourceName = "kernel.cpp";

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string ReadFileOr(const fs::path& path, const std::string& fallback) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fallback;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json ToJson(const CompileResult& r) {
  json diags = json::array(), remarks = json::array();
  for (const Diagnostic& d : r.diagnostics)
    diags.push_back({{"file", d.file}, {"line", d.line}, {"column", d.column}, {"severity", d.severity}, {"message", d.message}});
  for (const Remark& m : r.remarks)
    remarks.push_back({{"line", m.line}, {"column", m.column}, {"vectorized", m.vectorized}, {"message", m.message}});
  return {{"status", std::string(StatusName(r.status))}, {"message", r.message}, {"diagnostics", diags},
          {"remarks", remarks}, {"details", r.details}};
}

bool FromJson(const json& j, CompileResult& r) {
  auto status = ParseStatus(j.value("status", std::string()));
  if (!status) return false;
  r.status = *status;
  r.message = j.value("message", std::string());
  for (const auto& d : j.value("diagnostics", json::array()))
    r.diagnostics.push_back({d.value("file", ""), d.value("line", 0), d.value("column", 0), d.value("severity", ""), d.value("message", "")});
  for (const auto& m : j.value("remarks", json::array()))
    r.remarks.push_back({m.value("line", 0), m.value("column", 0), m.value("vectorized", false), m.value("message", "")});
  r.details = j.value("details", std::vector<std::string>{});
  return true;
}

// Every assembly file the compile left in `work` (-save-temps=obj), concatenated; nullopt when
// there is none, so that a compile whose assembly cannot be read is never passed unread.
std::optional<std::string> ReadAssemblyOutputs(const fs::path& work) {
  std::optional<std::string> text;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(work, ec))
    if (entry.path().extension() == ".s") text = text.value_or("") + ReadFileOr(entry.path(), "") + "\n";
  return text;
}

// The header name a resolved include path stands for, relative to a system include root.
std::string HeaderNameOf(const std::string& path) {
  for (const char* root : {"/usr/include/c++/", "/usr/lib/gcc/x86_64-linux-gnu/", "/usr/include/x86_64-linux-gnu/", "/usr/include/"}) {
    if (path.rfind(root, 0) != 0) continue;
    std::string rest = path.substr(std::string(root).size());
    // versioned roots: "12/cmath", "12/include/immintrin.h"
    if (std::string(root).find("c++") != std::string::npos || std::string(root).find("gcc") != std::string::npos) {
      rest = rest.substr(rest.find('/') + 1);
      if (rest.rfind("include/", 0) == 0) rest = rest.substr(8);
    }
    return rest;
  }
  return path;
}

}  // namespace

Compiler::Compiler(CompilerConfig config) : config_(std::move(config)) {
  SpawnOptions version;
  version.argv = {config_.cxx, "--version"};
  version.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  const ProcessResult r = RunProcess(version, 10);
  identity_ = HeadLines(r.stdout_text, 1) + "|" + MachineFingerprint();
}

std::string Compiler::Prelude(const Task& task) {
  return "// kernelgym prelude: the entry point's declaration, from task.json.\n"
         "#include <cstdint>\n"
         "extern \"C\" __attribute__((visibility(\"default\"))) " + task.signature + ";\n";
}

CompileResult Compiler::Compile(const std::string& source, const Task& task) const {
  const auto start = std::chrono::steady_clock::now();
  const std::string prelude = Prelude(task);
  // kResultFormat changes whenever what is cached for a source changes meaning: entries written by
  // an older parser must not be served. v2: diagnostics with bytes that are not UTF-8 or with raw
  // control characters are parsed (they were lost, and the raw JSON line became the message).
  // v3: inline assembly that reads files or builds directives is refused (AssemblerFileDirective).
  static constexpr const char* kResultFormat = "compile-result:v3";
  std::vector<std::string> key_parts{kResultFormat, identity_, prelude, source,
                                     config_.precompiled_headers ? PrecompiledHeaderSource() : std::string()};
  key_parts.insert(key_parts.end(), task.compile_flags.begin(), task.compile_flags.end());
  for (const auto& h : task.policy.extra_allowed_headers) key_parts.push_back("header:" + h);
  // An object built without the sandbox (which could read any file) must never be served to a
  // sandboxed evaluation.
  key_parts.push_back(ProbeSandbox().bwrap ? "sandbox:bwrap" : "sandbox:none");
  const std::string key = Sha256Hex(key_parts);
  const fs::path entry = config_.cache_dir / "compile" / key.substr(0, 2) / key;

  CompileResult result;
  std::ifstream cached(entry / "result.json");
  if (cached) {
    try {
      if (FromJson(json::parse(cached), result) &&
          (result.status != Status::kOk || fs::exists(entry / "kernel.so"))) {
        result.cached = true;
        if (result.status == Status::kOk) result.shared_object = entry / "kernel.so";
        result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return result;
      }
    } catch (const json::exception&) {
      // A damaged entry is rebuilt below.
    }
    result = CompileResult{};
  }
  result = CompileUncached(source, task, entry);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::vector<std::string> Compiler::BaseFlags(const Task& task) const {
  std::vector<std::string> flags{"-std=c++20"};
  flags.insert(flags.end(), task.compile_flags.begin(), task.compile_flags.end());
  flags.insert(flags.end(), {"-fPIC", "-fvisibility=hidden", "-fvisibility-inlines-hidden"});
  return flags;
}

std::string Compiler::PrecompiledHeaderSource() {
  // The headers kernels actually use. Loading a precompiled header costs time in proportion to
  // its size (these: ~57 MB, a starter compiles in ~0.1 s; all allowed headers: ~85 MB, ~0.17 s),
  // so the rarely used ones (<functional>, <memory>, ...) are parsed when included instead.
  static const char* const kPrecompiled[] = {"cstdint", "cstddef", "cmath",  "cstring", "cstdlib",     "algorithm",
                                              "limits",  "array",   "vector", "numeric", "immintrin.h", "omp.h"};
  std::string text = "// kernelgym: common allowed headers, precompiled once per compiler and flag set.\n";
  for (const char* header : kPrecompiled) text += std::string("#include <") + header + ">\n";
  return text;
}

fs::path Compiler::EnsurePrecompiledHeader(const std::vector<std::string>& flags) const {
  if (!config_.precompiled_headers) return {};
  std::vector<std::string> key_parts{identity_, PrecompiledHeaderSource()};
  key_parts.insert(key_parts.end(), flags.begin(), flags.end());
  const std::string key = Sha256Hex(key_parts);
  std::lock_guard lock(pch_mutex_);
  if (auto it = pch_dirs_.find(key); it != pch_dirs_.end()) return it->second;
  const fs::path dir = config_.cache_dir / "pch" / key;
  std::error_code ec;
  if (!fs::exists(dir / "kernelgym_pch.h.gch")) {
    // Built in a scratch folder inside the same sandbox view the compiles use, then published
    // with an atomic rename (another process may race us to it: either copy is the same).
    const fs::path scratch = config_.cache_dir / "pch" / (key + ".tmp-" + std::to_string(getpid()));
    fs::create_directories(scratch, ec);
    WriteFile(scratch / "kernelgym_pch.h", PrecompiledHeaderSource());
    const bool sandboxed = ProbeSandbox().bwrap;
    const std::string header = sandboxed ? "/pch/kernelgym_pch.h" : (scratch / "kernelgym_pch.h").string();
    std::vector<std::string> argv{config_.cxx};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"-x", "c++-header", header, "-o", header + ".gch"});
    SandboxSpec spec;
    spec.binds.push_back({scratch.string(), "/pch", true});
    SpawnOptions options;
    options.argv = SandboxCommand(spec, argv);
    options.env = {"PATH=/usr/bin:/bin", "LC_ALL=C", "TMPDIR=/tmp"};
    options.limits = {config_.cpu_seconds, config_.memory_bytes, std::size_t{1} << 30, 256};
    const ProcessResult r = RunProcess(options, config_.wall_seconds);
    if (r.ok()) {
      fs::permissions(scratch, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                   fs::perms::others_read | fs::perms::others_exec, ec);
      fs::rename(scratch, dir, ec);
    }
    fs::remove_all(scratch, ec);
  }
  const fs::path result = fs::exists(dir / "kernelgym_pch.h.gch") ? dir : fs::path();
  pch_dirs_[key] = result;
  return result;
}

CompileResult Compiler::CompileUncached(const std::string& source, const Task& task, const fs::path& entry) const {
  CompileResult result;
  std::error_code ec;
  const fs::path scratch_root = config_.cache_dir / "scratch";
  fs::create_directories(scratch_root, ec);
  std::mt19937_64 rng(std::random_device{}());
  const fs::path work = scratch_root / (std::to_string(getpid()) + "-" + std::to_string(rng()));
  fs::create_directories(work, ec);
  if (ec) {
    result.message = "cannot create the compile directory " + work.string() + ": " + ec.message();
    return result;
  }
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ignored;
      fs::remove_all(dir, ignored);
    }
  } cleanup{work};

  WriteFile(work / kSourceName, source);
  WriteFile(work / "prelude.h", Prelude(task));
  WriteFile(work / "exports.map", "{ global: kernel; local: *; };\n");

  const std::vector<std::string> base_flags = BaseFlags(task);
  const fs::path pch_dir = EnsurePrecompiledHeader(base_flags);
  std::vector<std::string> compile{config_.cxx};
  compile.insert(compile.end(), base_flags.begin(), base_flags.end());
  if (!pch_dir.empty()) compile.insert(compile.end(), {"-include", ProbeSandbox().bwrap ? "/pch/kernelgym_pch.h" : (pch_dir / "kernelgym_pch.h").string()});
  // -save-temps=obj keeps the compiler's assembly output (kernel.so-kernel.s) for the directive
  // check below; it costs no measurable time and still uses the precompiled header.
  compile.insert(compile.end(), {"-shared", "-save-temps=obj", "-include", "prelude.h", "-H", "-fdiagnostics-format=json",
                                 "-fopt-info-vec-all=remarks.txt", "-Wl,--version-script=exports.map",
                                 "-Wl,-z,now", "-Wl,-z,relro", kSourceName, "-o", "kernel.so"});
  const bool sandboxed = ProbeSandbox().bwrap;
  SandboxSpec spec;
  spec.binds.push_back({work.string(), "/work", true});
  if (!pch_dir.empty()) spec.binds.push_back({pch_dir.string(), "/pch", false});
  spec.working_dir = "/work";
  SpawnOptions options;
  options.argv = SandboxCommand(spec, compile);
  if (!sandboxed) options.working_dir = work.string();
  options.env = {"PATH=/usr/bin:/bin", "LC_ALL=C", "TMPDIR=/tmp"};
  options.limits = {config_.cpu_seconds, config_.memory_bytes, std::size_t{256} << 20, 256};
  options.cpus = NonTimingCpus(task.threads);
  const ProcessResult run = RunProcess(options, config_.wall_seconds);
  if (!run.started) {
    result.message = "the compiler did not start: " + run.error;
    return result;
  }

  CompilerOutput parsed = ParseCompilerStderr(run.stderr_text);
  result.diagnostics = parsed.diagnostics;
  result.remarks = ParseVectorizationRemarks(ReadFileOr(work / "remarks.txt", ""), kSourceName);

  // What the preprocessor really included from the main file: catches includes that a macro or
  // another trick hid from the text check.
  for (const std::string& path : parsed.direct_includes) {
    if (path == "prelude.h" || path == "./prelude.h" || path == "/work/prelude.h" || path.find("kernelgym_pch.h") != std::string::npos) continue;
    const std::string header = HeaderNameOf(path);
    if (path.rfind("/usr/", 0) != 0 || !IsAllowedHeader(header, task.policy)) {
      result.status = Status::kRejected;
      result.message = "the source included '" + path + "', which is not an allowed header";
      return result;
    }
  }

  if (run.timed_out || run.signal != 0) {
    result.status = Status::kCompileError;
    result.message = "the compiler was " + run.Describe(config_.wall_seconds) +
                     " (limits: " + std::to_string(static_cast<int>(config_.cpu_seconds)) + " s CPU, " +
                     std::to_string(config_.memory_bytes >> 20) + " MiB memory)";
    result.details.push_back(ValidUtf8(HeadLines(run.stderr_text, 5)));
  } else if (run.exit_code != 0) {
    result.status = Status::kCompileError;
    int errors = 0;
    const Diagnostic* first = nullptr;
    for (const Diagnostic& d : result.diagnostics)
      if (d.severity == "error" || d.severity == "fatal error") {
        if (!first) first = &d;
        ++errors;
      }
    if (first) {
      result.message = std::to_string(errors) + " error(s); first: " + first->file + ":" + std::to_string(first->line) +
                       ":" + std::to_string(first->column) + ": " + first->message;
    } else {
      result.message = "the compiler failed (" + run.Describe() + ")";
    }
    for (const std::string& line : parsed.unparsed) {
      result.details.push_back(line);
      if (!first && line.find("error") != std::string::npos && result.message.find(':') == std::string::npos)
        result.message += ": " + line;
    }
    if (!first && !parsed.unparsed.empty()) result.message += ": " + parsed.unparsed.front();
  } else if (const std::optional<std::string> assembly = ReadAssemblyOutputs(work); !assembly) {
    result.message = "the compiler left no assembly output to check (-save-temps=obj)";
    return result;  // internal_error, not cached
  } else if (const std::string directive = AssemblerFileDirective(*assembly); !directive.empty()) {
    // The assembler sees the toolchain's files (/usr/lib holds compiled libraries): a kernel
    // is the source the policy wrote, not bytes or machine code the assembler pulled in.
    result.status = Status::kRejected;
    result.message = "inline assembly uses the assembler directive " + directive +
                     ": directives that read files (.incbin, .include) or build text (.macro, .irp, .irpc) are not allowed";
  } else {
    result.status = Status::kOk;
    result.message = "compiled";
  }

  // Publish: results (good or bad) are cached, so a policy that resubmits a source pays nothing.
  const fs::path staging = entry.string() + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(rng());
  fs::create_directories(staging, ec);
  if (result.status == Status::kOk) {
    fs::copy_file(work / "kernel.so", staging / "kernel.so", ec);
    fs::permissions(staging / "kernel.so", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                               fs::perms::others_read, ec);
  }
  // The text in `result` is valid UTF-8 (ParseCompilerStderr); replace, never throw, regardless.
  WriteFile(staging / "result.json", ToJson(result).dump(-1, ' ', false, json::error_handler_t::replace));
  fs::create_directories(entry.parent_path(), ec);
  fs::rename(staging, entry, ec);
  if (ec) fs::remove_all(staging, ec);  // another process published first: theirs is identical
  if (result.status == Status::kOk) result.shared_object = entry / "kernel.so";
  return result;
}

}  // namespace kernelgym
