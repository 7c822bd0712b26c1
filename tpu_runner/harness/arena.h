// Where the harness keeps the tensors a candidate sees, laid out so that misuse is caught by
// the MMU rather than by trust:
//  - inputs live in a memfd mapped read-only at the arena; the harness refreshes them through a
//    second, writable mapping elsewhere. A kernel writing an input faults (SIGSEGV in an input
//    range = "wrote to input x").
//  - every buffer ends flush against a PROT_NONE guard page: writing past the end faults.
//  - the whole arena sits at one aligned address range, so the seccomp filter can forbid
//    mprotect/munmap/mremap/madvise/mmap on it with a single masked comparison.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kernelgym {

struct ArenaBuffer {
  std::string name;
  std::byte* data = nullptr;     // what the kernel and the reference see
  std::byte* writable = nullptr; // harness-only alias (inputs); == data for outputs
  std::size_t bytes = 0;
  bool read_only = false;
  std::span<std::byte> view() const { return {data, bytes}; }
  std::span<std::byte> alias() const { return {writable, bytes}; }
};

class Arena {
 public:
  // Address-range mask for seccomp: an address a is in the arena iff (a & kMask) == base().
  static constexpr uint64_t kSpanBits = 40;  // 1 TiB of address space
  static constexpr uint64_t kMask = ~((uint64_t{1} << kSpanBits) - 1);

  // sizes: per buffer; read_only marks inputs. Returns false with error() on failure.
  bool Create(const std::vector<std::pair<std::string, std::size_t>>& inputs,
              const std::vector<std::pair<std::string, std::size_t>>& outputs);

  const std::vector<ArenaBuffer>& buffers() const { return buffers_; }
  uint64_t base() const { return base_; }
  const std::string& error() const { return error_; }

  // Which buffer (and whether its guard page) an address falls in; nullptr if none.
  const ArenaBuffer* Find(const void* address, bool* in_guard) const;

 private:
  std::vector<ArenaBuffer> buffers_;
  std::vector<std::pair<uint64_t, uint64_t>> guards_;  // [lo, hi) of each buffer's guard page
  uint64_t base_ = 0;
  std::string error_;
};

}  // namespace kernelgym
