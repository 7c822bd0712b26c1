// The judge's side of the report pipe to the runner. Only trusted code runs in the judge's
// process, so a frame here is what the judge saw; the runner still checks that the frames it
// needs (every trial's outputs) all arrived.
#pragma once

#include "tpu_runner/cpu/harness_protocol.h"

namespace kernelgym::report {

void Init(int report_fd);
void Send(const Frame& frame);

}  // namespace kernelgym::report
