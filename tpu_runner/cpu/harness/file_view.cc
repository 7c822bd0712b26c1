#include "tpu_runner/cpu/harness/file_view.h"

#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <filesystem>

namespace kernelgym {
namespace {

namespace fs = std::filesystem;

// The folder this process's libc was loaded from (the multiarch library folder).
std::string LibraryFolder() {
  std::string folder = "/usr/lib/x86_64-linux-gnu";
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.find("/libc.so.") != std::string::npos) {
          std::error_code ec;
          *static_cast<std::string*>(data) = fs::canonical(name, ec).parent_path().string();
          return 1;
        }
        return 0;
      },
      &folder);
  return folder;
}

// "<name>.so.<digits>" in `folder` (the soname the dynamic linker asks for).
std::vector<std::string> Sonames(const std::string& folder, const std::string& name) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string file = entry.path().filename().string();
    const std::string prefix = name + ".so.";
    if (file.rfind(prefix, 0) != 0 || file.size() == prefix.size()) continue;
    if (file.find_first_not_of("0123456789", prefix.size()) != std::string::npos) continue;
    out.push_back(file);
  }
  return out;
}

bool MakeParents(const std::string& path) {
  std::string partial;
  for (std::size_t i = 1; i < path.size(); ++i) {
    if (path[i] != '/') continue;
    partial = path.substr(0, i);
    if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

}  // namespace

FileView CandidateView(const std::string& executor, const std::string& kernel, const std::vector<std::string>& libraries) {
  FileView view;
  view.executor = "/kernelgym/kernelgym-executor";
  view.kernel = "/kernelgym/kernel.so";
  view.binds = {{executor, view.executor}, {kernel, view.kernel}};
  const std::string folder = LibraryFolder();
  std::vector<std::string> names = {"libc", "libm", "libstdc++", "libgcc_s"};  // the executor's own
  for (const std::string& name : libraries)
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  for (const std::string& name : names)
    for (const std::string& soname : Sonames(folder, name)) {
      std::error_code ec;
      const fs::path real = fs::canonical(fs::path(folder) / soname, ec);
      if (!ec) view.binds.push_back({real.string(), folder + "/" + soname});
    }
  std::error_code ec;
  const fs::path loader = fs::canonical("/lib64/ld-linux-x86-64.so.2", ec);
  if (!ec) view.binds.push_back({loader.string(), "/lib64/ld-linux-x86-64.so.2"});
  if (folder.rfind("/usr/", 0) == 0) view.symlinks.push_back({"usr/lib", "/lib"});
  return view;
}

bool EnterView(const FileView& view, const std::string& mount_point, std::string& error) {
  auto fail = [&](const std::string& what) {
    error = what + ": " + std::strerror(errno);
    return false;
  };
  if (unshare(CLONE_NEWNS) != 0) return fail("unshare(CLONE_NEWNS)");
  if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return fail("making mounts private");
  if (mount("tmpfs", mount_point.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755") != 0)
    return fail("tmpfs at " + mount_point);
  for (const auto& [source, target] : view.binds) {
    const std::string where = mount_point + target;
    if (!MakeParents(where)) return fail("mkdir for " + target);
    const int fd = open(where.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
    if (fd < 0) return fail("creating " + target);
    close(fd);
    if (mount(source.c_str(), where.c_str(), nullptr, MS_BIND, nullptr) != 0) return fail("binding " + source);
    if (mount(nullptr, where.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
      return fail("making " + target + " read-only");
  }
  for (const auto& [target, link] : view.symlinks)
    if (symlink(target.c_str(), (mount_point + link).c_str()) != 0) return fail("symlink " + link);
  if (mount(nullptr, mount_point.c_str(), nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
    return fail("making the view read-only");
  if (chdir(mount_point.c_str()) != 0 || chroot(".") != 0 || chdir("/") != 0) return fail("chroot");
  return true;
}

}  // namespace kernelgym
