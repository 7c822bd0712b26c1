#include "tpu_runner/cpu/symbol_policy.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <map>
#include <mutex>

namespace kernelgym {
namespace {

namespace fs = std::filesystem;

const std::set<std::string>& DeniedImports() {
  static const std::set<std::string> kDenied{
      // threads and processes: work must not continue after `kernel` returns, nor escape the sandbox
      "pthread_create", "thrd_create", "fork", "vfork", "_Fork", "clone", "clone3", "daemon",
      "execve", "execv", "execvp", "execvpe", "execl", "execlp", "execle", "fexecve", "system", "popen",
      "posix_spawn", "posix_spawnp",
      // dynamic loading: the way to reach BLAS, libtorch or the harness's own symbols
      "dlopen", "dlmopen", "dlsym", "dlvsym", "dladdr", "dladdr1", "dlinfo", "dl_iterate_phdr", "__libc_dlopen_mode",
      "__libc_dlsym", "_dl_find_object",
      // network
      "socket", "socketpair", "connect", "bind", "listen", "accept", "accept4", "sendto", "recvfrom", "sendmsg",
      "recvmsg", "send", "recv", "getaddrinfo", "gethostbyname",
      // raw system calls, tracing, memory mapping (could unprotect inputs or patch code)
      "syscall", "ptrace", "process_vm_readv", "process_vm_writev", "mprotect", "pkey_mprotect", "mmap", "mmap64",
      "munmap", "mremap", "madvise", "remap_file_pages", "memfd_create", "shm_open", "userfaultfd",
      // signals: surviving faults or killing the harness
      "sigaction", "signal", "sigset", "bsd_signal", "sysv_signal", "kill", "tgkill", "tkill", "killpg",
      "sigaltstack", "setjmp", "_setjmp", "sigsetjmp", "__sigsetjmp", "longjmp", "_longjmp", "siglongjmp",
      // files and limits
      "open", "open64", "openat", "openat64", "creat", "creat64", "fopen", "fopen64", "freopen", "opendir",
      "setrlimit", "setrlimit64", "prlimit", "prlimit64", "prctl", "seccomp", "unshare", "setns", "chdir", "chroot",
      "ioctl", "setuid", "setgid", "seteuid", "setresuid",
      // scheduling: leaving the timing CPU or changing priorities
      "sched_setaffinity", "pthread_setaffinity_np", "sched_setscheduler", "sched_setparam", "setpriority", "nice",
      "pthread_setschedparam"};
  return kDenied;
}

// std::thread, std::jthread and std::async start threads through these.
constexpr const char* kDeniedPrefixes[] = {"_ZNSt6thread", "_ZNSt7jthread", "_ZSt5async", "_ZNSt13__future_base"};

std::string SonameOf(const std::string& name) {
  static const std::map<std::string, std::string> kSonames{
      {"libc", "libc.so.6"},           {"libm", "libm.so.6"},          {"libgomp", "libgomp.so.1"},
      {"libstdc++", "libstdc++.so.6"}, {"libgcc_s", "libgcc_s.so.1"}, {"libmvec", "libmvec.so.1"}};
  auto it = kSonames.find(name);
  return it != kSonames.end() ? it->second : name;
}

fs::path FindLibrary(const std::string& soname) {
  for (const char* dir : {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib"}) {
    fs::path p = fs::path(dir) / soname;
    if (fs::exists(p)) return p;
    // "libopenblas" style names: take the first versioned match
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string file = entry.path().filename().string();
      if (file.rfind(soname + ".so", 0) == 0) return entry.path();
    }
  }
  return {};
}

// Templates and inline functions of namespace std that a kernel instantiates (std::vector, ...)
// may coincide with libstdc++'s own instantiations: the same code, not interposition. (The
// version script keeps them local anyway.) operator new/delete (_Znw*, _Zdl*) are not exempt.
bool IsStandardLibraryInstantiation(const std::string& name) {
  for (const char* prefix : {"_ZNSt", "_ZNKSt", "_ZSt", "_ZN9__gnu_cxx", "_ZNK9__gnu_cxx"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

}  // namespace

ElfSymbols ReadElfSymbols(const fs::path& path) {
  ElfSymbols out;
  if (elf_version(EV_CURRENT) == EV_NONE) {
    out.error = "libelf initialization failed";
    return out;
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    out.error = "cannot open " + path.string();
    return out;
  }
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  if (!elf || elf_kind(elf) != ELF_K_ELF) {
    out.error = path.string() + " is not an ELF file";
    if (elf) elf_end(elf);
    close(fd);
    return out;
  }
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr) || (shdr.sh_type != SHT_SYMTAB && shdr.sh_type != SHT_DYNSYM)) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data || shdr.sh_entsize == 0) continue;
    const std::size_t count = shdr.sh_size / shdr.sh_entsize;
    const bool dynamic = shdr.sh_type == SHT_DYNSYM;
    for (std::size_t i = 1; i < count; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym)) continue;
      const char* raw_name = elf_strptr(elf, shdr.sh_link, sym.st_name);
      if (!raw_name || !*raw_name) continue;
      const std::string name = raw_name;
      const int type = GELF_ST_TYPE(sym.st_info), binding = GELF_ST_BIND(sym.st_info);
      if (sym.st_shndx == SHN_UNDEF) {
        // Weak imports count too (a weak `socket` still binds to libc's); only the start-up
        // files' own weak references are expected in every shared object.
        static const std::set<std::string> kStartupWeak{"_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable",
                                                        "__gmon_start__", "__cxa_finalize"};
        if (dynamic && !(binding == STB_WEAK && kStartupWeak.count(name))) out.imported.insert(name);
        continue;
      }
      if (type == STT_FUNC || type == STT_OBJECT || type == STT_GNU_IFUNC || type == STT_TLS) out.defined.insert(name);
      if (dynamic && (binding == STB_GLOBAL || binding == STB_WEAK || binding == STB_GNU_UNIQUE)) out.exported.insert(name);
    }
  }
  elf_end(elf);
  close(fd);
  return out;
}

const std::set<std::string>& LibraryExports(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::set<std::string>> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  std::set<std::string>& exports = cache[name];
  const fs::path path = FindLibrary(SonameOf(name));
  if (!path.empty()) exports = ReadElfSymbols(path).exported;
  return exports;
}

bool IsDeniedImport(const std::string& symbol) {
  if (DeniedImports().count(symbol)) return true;
  for (const char* prefix : kDeniedPrefixes)
    if (symbol.rfind(prefix, 0) == 0) return true;
  return false;
}

SymbolCheckResult CheckSymbolPolicy(const fs::path& shared_object, const KernelPolicy& policy) {
  SymbolCheckResult result;
  auto violation = [&](std::string text) {
    if (result.ok) result.message = text;
    result.ok = false;
    result.details.push_back(std::move(text));
  };
  const ElfSymbols symbols = ReadElfSymbols(shared_object);
  if (!symbols.error.empty()) {
    violation(symbols.error);
    return result;
  }

  if (!symbols.exported.count("kernel")) violation("the shared object does not export `kernel`");
  for (const std::string& name : symbols.exported)
    if (name != "kernel") violation("exports `" + name + "`; only `kernel` may be exported");

  // Interposition: a definition that shadows a runtime library symbol.
  for (const char* runtime : {"libc", "libm", "libgomp", "libstdc++", "libgcc_s", "libmvec"}) {
    const std::set<std::string>& provided = LibraryExports(runtime);
    for (const std::string& name : symbols.defined)
      if (name != "kernel" && provided.count(name) && !IsStandardLibraryInstantiation(name))
        violation("defines `" + name + "`, which " + runtime + " provides: a kernel may not replace runtime symbols");
  }

  for (const std::string& name : symbols.imported) {
    if (IsDeniedImport(name)) {
      violation("calls `" + name + "`, which kernels may not use (threads, processes, loading, I/O, signals or syscalls)");
      continue;
    }
    bool provided = false;
    for (const std::string& lib : policy.allowed_libraries)
      if (LibraryExports(lib).count(name)) {
        provided = true;
        break;
      }
    if (!provided) {
      std::string allowed;
      for (const std::string& lib : policy.allowed_libraries) allowed += (allowed.empty() ? "" : ", ") + lib;
      violation("imports `" + name + "`, which none of the allowed libraries (" + allowed + ") provides");
    }
  }
  return result;
}

}  // namespace kernelgym
