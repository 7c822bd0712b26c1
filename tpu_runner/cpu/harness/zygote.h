// The warm start of the reference: `kernelgym-reference --zygote` loads libtorch once (per runner
// process and thread count) and then forks, per evaluation, a fresh judge with a fresh reference
// as its child — so that an evaluation no longer pays ~0.5-0.7 CPU-s for the dynamic loader.
//
//   runner ── bwrap sandbox ── zygote (libtorch loaded, nothing of any evaluation)
//                                └─ keeper (per evaluation: waits for the judge, tells the runner)
//                                     └─ judge: forks the reference, then execs kernelgym-harness
//                                          ├─ reference (a fork of the zygote: warm, fresh)
//                                          └─ executor  (the candidate; forked and exec'd as ever)
//
// What stays as it was: the judge is a fresh exec of kernelgym-harness (no libtorch, no memory
// of the zygote's) and draws its inputs' keys after the exec; the reference is its child (the
// judge waits for it, reads its CPU clock, kills it; it dies with the judge); the executor is the
// judge's child with its own uid, seccomp allow-list and file view. The zygote never sees a job,
// a key, an input or a candidate: each request carries only descriptors (the channels to the
// runner) and the CPUs to run on.
//
// The requests' format: tpu_runner/cpu/zygote_protocol.h (the runner writes them).
#pragma once

#include "tpu_runner/cpu/zygote_protocol.h"

namespace kernelgym {

// argv: kernelgym-reference --zygote --harness PATH --reference PATH --executor PATH
int RunZygote(int argc, char** argv);

// reference_main.cc: the reference from "loaded" on, on descriptors 3-5.
[[noreturn]] void RunReference();

}  // namespace kernelgym
