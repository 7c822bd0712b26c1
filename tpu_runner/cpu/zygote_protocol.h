// The runner <-> reference zygote wire format (the zygote: tpu_runner/cpu/harness/zygote.h; the
// runner's side: harness_zygote.h). Shared by both sides, as harness_protocol.h is for the judge.
//
// Requests arrive on descriptor 3, a SOCK_SEQPACKET socket whose other end only the runner holds
// (a socket pair: it has no name anyone could connect to): one message with five descriptors —
//   link     a SOCK_SEQPACKET socket: the runner writes 'k' (or closes it) to have the judge
//            killed; the keeper writes the judge's wait status (an int) once it ended
//   control  the judge's control channel (it becomes the judge's 3)
//   report   the judge's report pipe (its 4)
//   stdout, stderr
// and a JSON payload {"cpus": [...]}; the zygote answers each with one byte once it has forked
// the keeper. It exits when the runner closes its end.
#pragma once

namespace kernelgym {

constexpr int kZygoteRequestFd = 3;
constexpr int kZygoteFdsPerRequest = 5;

}  // namespace kernelgym
