// The runner's side of the warm reference (the process side: tpu_runner/cpu/harness/zygote.h; the wire: zygote_protocol.h).
// One zygote per runner process and thread count: a sandbox (the same bwrap view a per-evaluation
// harness gets) holding `kernelgym-reference --zygote`, which has loaded libtorch once. Each
// evaluation asks it for a fresh judge with a fresh reference forked warm; the judge's channels
// are the runner's own new pipes, so an evaluation can only ever read its own judge's frames.
//
// Why per runner process: the runner is what lives across evaluations (a served runner evaluates
// thousands); its zygote dies with it (bwrap --die-with-parent) and is started again by the next
// evaluation after it died (killed, crashed: the evaluation in flight when it died ends as an
// internal error, never hangs). A host-wide one would be a daemon shared by runners of different
// servers and users, with a socket others could find; per thread count, because OpenMP reads its
// settings (OMP_THREAD_LIMIT, ...) from the environment once, when libtorch loads.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/subprocess.h"
#include "tpu_runner/cpu/harness_session.h"

namespace kernelgym {

class HarnessZygote {
 public:
  // `tools_dir` holds kernelgym-harness, -reference and -executor; slots go under `scratch_root`.
  HarnessZygote(std::filesystem::path tools_dir, std::filesystem::path scratch_root, int threads);
  ~HarnessZygote();
  HarnessZygote(const HarnessZygote&) = delete;
  HarnessZygote& operator=(const HarnessZygote&) = delete;

  // Starts the zygote when it is not running (the first time, or after it died) and waits until
  // libtorch has loaded. False with `error` when it cannot (then it is not tried again: Broken()).
  bool EnsureStarted(std::string& error);
  // A harness forked from the zygote, its judge pinned to `cpus`. nullptr with `error` set when
  // the zygote cannot start.
  std::unique_ptr<HarnessProcess> Fork(const std::vector<int>& cpus, std::string& error);

  bool Broken() const { return !broken_.empty(); }
  pid_t pid() const { return process_.pid(); }  // the sandbox's process group (tests kill it)
  int starts() const { return starts_; }        // how many times it was started

 private:
  bool Running();
  void Stop();
  bool Send(int link, int control, int report, int out, int err, const std::vector<int>& cpus);

  std::filesystem::path tools_dir_, scratch_root_, slots_dir_;
  int threads_;
  ChildProcess process_;
  int request_fd_ = -1;
  uint64_t next_slot_ = 0;
  int starts_ = 0;
  std::string broken_;
};

}  // namespace kernelgym
