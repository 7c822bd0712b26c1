#include "tpu_runner/harness/report.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <strings.h>

namespace kernelgym::report {
namespace {

int g_fd = -1;
uint64_t g_cookie = 0;

void WriteRaw(const char* data, std::size_t size) {
  while (size > 0) {
    const long n = syscall(SYS_write, g_fd, data, size, g_cookie);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

// Appends a JSON string literal (escaping quotes, backslashes and control bytes).
char* AppendEscaped(char* out, char* end, const char* text) {
  if (out < end) *out++ = '"';
  for (; *text && out + 7 < end; ++text) {
    const unsigned char c = static_cast<unsigned char>(*text);
    if (c == '"' || c == '\\') {
      *out++ = '\\';
      *out++ = static_cast<char>(c);
    } else if (c < 0x20) {
      *out++ = ' ';
    } else {
      *out++ = static_cast<char>(c);
    }
  }
  if (out < end) *out++ = '"';
  return out;
}

char* AppendText(char* out, char* end, const char* text) {
  while (*text && out < end) *out++ = *text++;
  return out;
}

char* AppendInt(char* out, char* end, long long v) {
  char digits[24];
  int n = 0;
  const bool negative = v < 0;
  unsigned long long u = negative ? 0ULL - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v);
  do digits[n++] = static_cast<char>('0' + u % 10); while ((u /= 10) != 0);
  if (negative && out < end) *out++ = '-';
  while (n > 0 && out < end) *out++ = digits[--n];
  return out;
}

}  // namespace

void Init(int report_fd, uint64_t cookie) {
  g_fd = report_fd;
  g_cookie = cookie;
}

int fd() { return g_fd; }
uint64_t cookie() { return g_cookie; }

void Send(const Frame& frame) {
  const std::string bytes = EncodeFrame(frame);
  WriteRaw(bytes.data(), bytes.size());
}

void SendAndWipe(Frame&& frame) {
  std::string bytes = EncodeFrame(frame);
  WriteRaw(bytes.data(), bytes.size());
  explicit_bzero(bytes.data(), bytes.size());
  explicit_bzero(frame.data.data(), frame.data.size());
}

void SendViolation(const char* kind, const char* message, long long value) {
  char meta[1024];
  char* end = meta + sizeof(meta);
  char* p = AppendText(meta, end, "{\"kind\":");
  p = AppendEscaped(p, end, kind);
  p = AppendText(p, end, ",\"message\":");
  p = AppendEscaped(p, end - 32, message);
  p = AppendText(p, end, ",\"value\":");
  p = AppendInt(p, end, value);
  p = AppendText(p, end, "}");
  // One write of at most PIPE_BUF bytes: atomic on a pipe, never interleaved with another frame.
  char frame[16 + sizeof(meta)];
  const uint32_t frame_kind = static_cast<uint32_t>(FrameKind::kViolation);
  const uint32_t meta_len = static_cast<uint32_t>(p - meta);
  const uint64_t data_len = 0;
  std::memcpy(frame, &frame_kind, 4);
  std::memcpy(frame + 4, &meta_len, 4);
  std::memcpy(frame + 8, &data_len, 8);
  std::memcpy(frame + 16, meta, meta_len);
  WriteRaw(frame, 16 + meta_len);
}

}  // namespace kernelgym::report
