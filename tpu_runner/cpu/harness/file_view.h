// The candidate's file view: a private mount namespace whose root is a fresh, read-only tmpfs
// holding the executor, the kernel and the runtime libraries a kernel may link (the task's
// symbol policy) — and nothing else. Whatever the candidate reads or maps, there is no libtorch,
// BLAS or other library in reach that could do its work, no file of the judge's, and no /proc.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kernelgym {

struct FileView {
  std::vector<std::pair<std::string, std::string>> binds;     // (path here, path in the view)
  std::vector<std::pair<std::string, std::string>> symlinks;  // (target, link in the view)
  std::string executor, kernel;                               // their paths in the view
};

// `libraries`: name prefixes such as "libc" or "libstdc++" (KernelPolicy::allowed_libraries);
// each is found as <name>.so.<version> next to this process's libc. The dynamic loader and the
// executor's own libraries are always in.
FileView CandidateView(const std::string& executor, const std::string& kernel, const std::vector<std::string>& libraries);

// For a forked, single-threaded child that still has the judge's capabilities: enters a new
// mount namespace, builds the view on a tmpfs at `mount_point` (an existing empty folder) and
// chroots into it. False with `error` when the machine does not allow it (then nothing changed).
bool EnterView(const FileView& view, const std::string& mount_point, std::string& error);

}  // namespace kernelgym
