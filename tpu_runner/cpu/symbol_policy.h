// Stage 3: what the built shared object exports, imports and defines.
//  - exports: only `kernel` (a function);
//  - imports: only symbols that the task's allowed libraries provide, minus a deny list of calls
//    no kernel needs (threads, processes, exec, dynamic loading, sockets, raw syscalls, memory
//    mapping, signals, file I/O, CPU affinity);
//  - definitions: no symbol that the C/C++ runtime libraries also define (clock_gettime, memcpy,
//    operator new, ...): a kernel must not interpose on the harness or the reference.
#pragma once

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "datasets/task.h"

namespace kernelgym {

struct ElfSymbols {
  std::set<std::string> imported;   // undefined in .dynsym (weak ones too, but the crt's own)
  std::set<std::string> exported;   // defined GLOBAL/WEAK in .dynsym
  std::set<std::string> defined;    // defined FUNC/OBJECT/IFUNC in .symtab or .dynsym, any binding
  std::string error;                // non-empty when the file could not be read as ELF
};

ElfSymbols ReadElfSymbols(const std::filesystem::path& path);

// Exported dynamic symbols of a library named like "libc", "libm", "libgomp", "libstdc++",
// "libgcc_s" or a soname; cached. Empty when the library is not found.
const std::set<std::string>& LibraryExports(const std::string& name);

struct SymbolCheckResult {
  bool ok = true;
  std::string message;               // first violation
  std::vector<std::string> details;  // every violation
};

[[nodiscard]] SymbolCheckResult CheckSymbolPolicy(const std::filesystem::path& shared_object, const KernelPolicy& policy);

// True when the name is on the deny list (by exact name or a denied C++ prefix).
bool IsDeniedImport(const std::string& symbol);

}  // namespace kernelgym
