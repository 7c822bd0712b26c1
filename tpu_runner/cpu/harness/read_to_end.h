// Reading a pipe to its end: how the executor and the reference take the message the judge
// writes them once (a plan, a job) before closing its end.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <string>

namespace kernelgym {

inline std::string ReadToEnd(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

}  // namespace kernelgym
