// The process sandbox, built on bubblewrap (namespaces + a minimal read-only filesystem view).
// Limits (rlimits) come from SpawnOptions; seccomp and the uid drop happen inside the harness,
// where the code that must be confined is known.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kernelgym {

// What this machine lets us use; probed once per process by running bwrap for real.
// KERNELGYM_SANDBOX=none turns the namespaces off (for machines where bwrap cannot work, e.g.
// some containers); every result then says so in `protections`.
struct SandboxSupport {
  bool bwrap = false;        // bwrap runs with new net/pid/ipc/mount namespaces
  bool root = false;         // we are root: the harness can drop to an unprivileged uid
  std::string bwrap_path;
  std::string problem;       // why bwrap is unusable, when it is
};

const SandboxSupport& ProbeSandbox();

struct BindMount {
  std::string source;
  std::string target;
  bool writable = false;
};

struct SandboxSpec {
  std::vector<BindMount> binds;       // in addition to the toolchain/library view
  std::string working_dir;            // inside the sandbox
  // Lets the (trusted) judge start the candidate's process in a file view of its own (mount
  // namespace, chroot), with a sandbox uid, and kill it.
  bool keep_setuid_capability = false;
  bool cpu_info = false;              // /proc/cpuinfo and /sys/devices/system/cpu (libtorch needs them)
  std::vector<std::string> devices;   // device nodes to pass through (a TPU VM's /dev/accel*)
  // The view's own root and /dev read-only, so that the private /tmp and the writable binds are
  // the only places a process can write: what a process that serves several jobs in turn (the
  // pallas fork server) must empty between them.
  bool read_only_root = false;
};

// Wraps argv in bwrap when it works; otherwise returns argv unchanged (the caller records that
// the namespace protections were off). The view holds /usr/{bin,lib,libexec,include}, the
// /lib* symlinks, /etc/alternatives and /etc/ld.so.cache, a private /tmp and /dev — no /etc,
// no /home, no /root, no /proc (so no /proc/self/mem), no network.
std::vector<std::string> SandboxCommand(const SandboxSpec& spec, const std::vector<std::string>& argv);

// The protections SandboxCommand gives on this machine, by name (for EvalResult::protections).
std::map<std::string, bool> NamespaceProtections();

}  // namespace kernelgym
