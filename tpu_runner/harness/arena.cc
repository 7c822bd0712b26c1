#include "tpu_runner/harness/arena.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kernelgym {
namespace {

std::size_t RoundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

bool Arena::Create(const std::vector<std::pair<std::string, std::size_t>>& inputs,
                   const std::vector<std::pair<std::string, std::size_t>>& outputs) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::size_t input_bytes = 0, total = page;  // leading guard page
  for (const auto& [name, bytes] : inputs) input_bytes += RoundUp(bytes, page);
  for (const auto& [name, bytes] : inputs) total += RoundUp(bytes, page) + page;
  for (const auto& [name, bytes] : outputs) total += RoundUp(bytes, page) + page;
  if (total >= (std::size_t{1} << kSpanBits)) {
    error_ = "tensors too large for the arena";
    return false;
  }
  // Reserve the whole range PROT_NONE at an aligned address (several candidates, in case ASLR
  // put something at one of them).
  void* reserved = MAP_FAILED;
  for (uint64_t slot = 0x5a; slot < 0x7a && reserved == MAP_FAILED; ++slot) {
    const uint64_t want = slot << kSpanBits;
    reserved = mmap(reinterpret_cast<void*>(want), total, PROT_NONE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (reserved != MAP_FAILED && reinterpret_cast<uint64_t>(reserved) != want) {
      munmap(reserved, total);  // old kernels treat the flag as a hint
      reserved = MAP_FAILED;
    }
  }
  if (reserved == MAP_FAILED) {
    error_ = std::string("cannot reserve the arena: ") + strerror(errno);
    return false;
  }
  base_ = reinterpret_cast<uint64_t>(reserved);

  const int memfd = memfd_create("kernelgym-inputs", MFD_CLOEXEC);
  if (memfd < 0 || ftruncate(memfd, static_cast<off_t>(std::max<std::size_t>(input_bytes, page))) != 0) {
    error_ = std::string("memfd: ") + strerror(errno);
    return false;
  }
  std::byte* alias = nullptr;
  if (input_bytes > 0) {
    void* a = mmap(nullptr, input_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
    if (a == MAP_FAILED) {
      error_ = std::string("input alias mmap: ") + strerror(errno);
      return false;
    }
    alias = static_cast<std::byte*>(a);
  }

  std::size_t offset = page;       // in the arena
  std::size_t file_offset = 0;     // in the memfd
  auto place = [&](const std::string& name, std::size_t bytes, bool read_only) -> bool {
    const std::size_t span = RoundUp(std::max<std::size_t>(bytes, 1), page);
    void* where = reinterpret_cast<void*>(base_ + offset);
    void* m = read_only ? mmap(where, span, PROT_READ, MAP_SHARED | MAP_FIXED, memfd, static_cast<off_t>(file_offset))
                        : mmap(where, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (m == MAP_FAILED) {
      error_ = "mmap of " + name + ": " + strerror(errno);
      return false;
    }
    // End the buffer flush against the guard page (64-byte aligned start).
    const std::size_t lead = (span - RoundUp(bytes, 64));
    ArenaBuffer b;
    b.name = name;
    b.bytes = bytes;
    b.read_only = read_only;
    b.data = static_cast<std::byte*>(m) + lead;
    b.writable = read_only ? alias + file_offset + lead : b.data;
    buffers_.push_back(b);
    guards_.push_back({base_ + offset + span, base_ + offset + span + page});
    offset += span + page;
    if (read_only) file_offset += span;
    return true;
  };
  for (const auto& [name, bytes] : inputs)
    if (!place(name, bytes, true)) return false;
  for (const auto& [name, bytes] : outputs)
    if (!place(name, bytes, false)) return false;
  close(memfd);
  return true;
}

const ArenaBuffer* Arena::Find(const void* address, bool* in_guard) const {
  const uint64_t a = reinterpret_cast<uint64_t>(address);
  for (std::size_t i = 0; i < buffers_.size(); ++i) {
    const uint64_t lo = reinterpret_cast<uint64_t>(buffers_[i].data) & ~uint64_t{4095};
    if (a >= lo && a < guards_[i].first) {
      *in_guard = false;
      return &buffers_[i];
    }
    if (a >= guards_[i].first && a < guards_[i].second) {
      *in_guard = true;
      return &buffers_[i];
    }
  }
  return nullptr;
}

}  // namespace kernelgym
