#include "tpu_runner/sandbox.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "core/subprocess.h"

namespace kernelgym {
namespace {

std::vector<std::string> BaseArgs(const std::string& bwrap) {
  std::vector<std::string> args{bwrap,
                                "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                                "--unshare-cgroup-try", "--die-with-parent", "--new-session",
                                "--ro-bind", "/usr/bin", "/usr/bin",
                                "--ro-bind", "/usr/lib", "/usr/lib",
                                "--ro-bind", "/usr/include", "/usr/include",
                                "--symlink", "usr/lib", "/lib",
                                "--symlink", "usr/bin", "/bin",
                                "--dev", "/dev",
                                "--tmpfs", "/tmp"};
  for (const char* optional : {"/usr/libexec", "/usr/lib64", "/etc/alternatives", "/etc/ld.so.cache"})
    if (std::filesystem::exists(optional)) args.insert(args.end(), {"--ro-bind", optional, optional});
  if (std::filesystem::exists("/usr/lib64")) args.insert(args.end(), {"--symlink", "usr/lib64", "/lib64"});
  return args;
}

}  // namespace

const SandboxSupport& ProbeSandbox() {
  static SandboxSupport support;
  static std::once_flag once;
  std::call_once(once, [] {
    support.root = geteuid() == 0;
    if (const char* mode = std::getenv("KERNELGYM_SANDBOX"); mode && std::string(mode) == "none") {
      support.problem = "namespaces disabled by KERNELGYM_SANDBOX=none";
      return;
    }
    for (const char* dir : {"/usr/bin", "/bin", "/usr/local/bin"}) {
      const std::string candidate = std::string(dir) + "/bwrap";
      if (access(candidate.c_str(), X_OK) == 0) {
        support.bwrap_path = candidate;
        break;
      }
    }
    if (support.bwrap_path.empty()) {
      support.problem = "bwrap not found (install bubblewrap)";
      return;
    }
    std::vector<std::string> argv = BaseArgs(support.bwrap_path);
    if (!support.root) argv.push_back("--unshare-user");
    argv.insert(argv.end(), {"--", "/usr/bin/true"});
    SpawnOptions options;
    options.argv = argv;
    const ProcessResult r = RunProcess(options, 10);
    if (!r.ok()) support.problem = "bwrap probe failed: " + r.Describe(10) + ": " + HeadLines(r.stderr_text, 3);
    else support.bwrap = true;
  });
  return support;
}

std::vector<std::string> SandboxCommand(const SandboxSpec& spec, const std::vector<std::string>& argv) {
  const SandboxSupport& support = ProbeSandbox();
  if (!support.bwrap) return argv;
  std::vector<std::string> args = BaseArgs(support.bwrap_path);
  if (!support.root) args.push_back("--unshare-user");
  if (spec.keep_setuid_capability && support.root)
    args.insert(args.end(), {"--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_KILL",
                             "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SYS_CHROOT"});
  if (spec.cpu_info) {
    args.insert(args.end(), {"--ro-bind", "/proc/cpuinfo", "/proc/cpuinfo"});
    if (std::filesystem::exists("/sys/devices/system/cpu"))
      args.insert(args.end(), {"--ro-bind", "/sys/devices/system/cpu", "/sys/devices/system/cpu"});
  }
  // bwrap creates missing parents of bind targets as 0700: make them traversable for the
  // unprivileged uid the harness drops to.
  std::vector<std::string> made;
  for (const BindMount& b : spec.binds) {
    std::vector<std::string> parents;
    for (std::filesystem::path p = std::filesystem::path(b.target).parent_path(); p != p.root_path() && !p.empty();
         p = p.parent_path())
      parents.insert(parents.begin(), p.string());
    for (const std::string& dir : parents) {
      if (dir == "/tmp" || dir.rfind("/usr", 0) == 0 || dir.rfind("/proc", 0) == 0 || dir.rfind("/sys", 0) == 0 ||
          std::find(made.begin(), made.end(), dir) != made.end())
        continue;
      made.push_back(dir);
      args.insert(args.end(), {"--perms", "0755", "--dir", dir});
    }
  }
  for (const BindMount& b : spec.binds)
    args.insert(args.end(), {b.writable ? "--bind" : "--ro-bind", b.source, b.target});
  for (const std::string& device : spec.devices) args.insert(args.end(), {"--dev-bind", device, device});
  // After every mount above (a remount is not recursive: /tmp and the binds keep their modes).
  if (spec.read_only_root) args.insert(args.end(), {"--remount-ro", "/dev", "--remount-ro", "/"});
  if (!spec.working_dir.empty()) args.insert(args.end(), {"--chdir", spec.working_dir});
  args.push_back("--");
  args.insert(args.end(), argv.begin(), argv.end());
  return args;
}

std::map<std::string, bool> NamespaceProtections() {
  const SandboxSupport& s = ProbeSandbox();
  return {{"network_namespace", s.bwrap},
          {"pid_namespace", s.bwrap},
          {"mount_namespace_readonly_view", s.bwrap},
          {"ipc_namespace", s.bwrap}};
}

}  // namespace kernelgym
