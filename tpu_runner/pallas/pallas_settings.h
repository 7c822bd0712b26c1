// How the pallas backend runs its Python processes: where the interpreter and the package are,
// which TPU generation it compiles for, and the switches tests and benchmarks turn.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace kernelgym {

struct PallasSettings {
  std::filesystem::path python;       // the venv's interpreter (scripts/pallas_venv.sh makes it)
  std::filesystem::path package_dir;  // the folder holding kernelgym_pallas/
  std::string target = "v5e";         // TPU generation to compile for without a TPU: v5e, v6e
  double start_timeout_s = 120;       // a process's import of jax and the target's opening
  // The judge's static check of the source (a first filter). Tests turn it off to show that no
  // verdict rests on it.
  bool static_check = true;
  // Each job's judge and tracer forked by a fork server that imported jax once (inside
  // bubblewrap's namespaces only); off: a process started per job. The benchmark compares both.
  bool fork_server = true;
  // The candidate's full-size compile and estimate reused for a program of the same content
  // (candidate_compile_cache.h); off: every evaluation compiles. The benchmark compares both.
  bool compile_cache = true;
  // The candidate's limits (compile, each trial) and the reference's are CPU time, summed over
  // the threads and processes of the judge's or the tracer's sandbox, so that a verdict does not
  // depend on how busy the machine is. A wall-clock limit of this many times each one ends a
  // process that sleeps or blocks (spending no CPU time). Tests lower it to see that happen.
  double wall_limit_factor = 10;
  // The most memory the judge's or the tracer's sandbox may hold (anonymous and shared memory of
  // its processes, a fork server included; core/resident_limit.h), read every 0.1 s: a tree that
  // holds more is killed and the evaluation ends with a verdict that says so. Their address space
  // stays 32 GiB (XLA reserves generously), which bounds nothing resident. Measured off a TPU:
  // at most 719 MiB for any starter of jaxbench-p/* and models/* (docs/pallas.md).
  std::uint64_t resident_limit_bytes = std::uint64_t{6} << 30;
  // The judge's on a TPU host instead: it times at the full shapes, whose inputs it draws in host
  // memory first (up to 14.4 GiB resident for jaxbench-p/megablox_gmm's, measured off a TPU).
  std::uint64_t tpu_judge_resident_limit_bytes = std::uint64_t{24} << 30;
};

// Where the judge's and the tracer's interpreter is: $KERNELGYM_PALLAS_PYTHON, else the build's
// pallas-venv; the package from $KERNELGYM_PALLAS_PACKAGE_DIR (another checkout's
// tpu_runner/pallas: the judge's Python under development, with this build), else the source tree; the target from $KERNELGYM_PALLAS_TARGET;
// KERNELGYM_PALLAS_FORK_SERVER=0 starts a process per job instead of forking;
// KERNELGYM_PALLAS_COMPILE_CACHE=0 compiles every candidate afresh;
// KERNELGYM_PALLAS_RESIDENT_LIMIT_MIB and KERNELGYM_PALLAS_TPU_JUDGE_RESIDENT_LIMIT_MIB set the two
// resident limits (in MiB).
PallasSettings DefaultPallasSettings();

}  // namespace kernelgym
