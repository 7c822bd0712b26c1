#include "tpu_runner/cpu/harness/report.h"

namespace kernelgym::report {
namespace {

int g_fd = -1;

}  // namespace

void Init(int report_fd) { g_fd = report_fd; }

void Send(const Frame& frame) {
  // A runner that went away stops caring; the judge finds out at its next read of the control
  // pipe and exits there.
  (void)WriteAll(g_fd, EncodeFrame(frame));
}

}  // namespace kernelgym::report
