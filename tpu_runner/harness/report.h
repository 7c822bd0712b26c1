// The harness's side of the report pipe. Every write goes through one raw write(2) carrying the
// job's cookie as a 4th argument, which the seccomp filter requires for this fd (see
// harness_protocol.h). Safe to call from signal handlers (ReportViolation).
#pragma once

#include <cstdint>
#include <string>

#include "tpu_runner/harness_protocol.h"

namespace kernelgym::report {

void Init(int report_fd, uint64_t cookie);
int fd();
uint64_t cookie();

void Send(const Frame& frame);
// Sends, then zeroes the frame's data and the encoded bytes: for answers that must not stay in
// the process's memory once the kernel is loaded.
void SendAndWipe(Frame&& frame);
// Async-signal-safe: builds {"kind": kind, "message": message, "value": value} by hand.
void SendViolation(const char* kind, const char* message, long long value);

}  // namespace kernelgym::report
