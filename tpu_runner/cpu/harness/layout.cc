#include "tpu_runner/cpu/harness/layout.h"

#include <unistd.h>

#include <algorithm>

namespace kernelgym {

uint64_t PageSize() {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  return page;
}

uint64_t RoundUp(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

int FileLayout::Add(const std::string& name, uint64_t bytes, bool input) {
  BufferPlace b;
  b.name = name;
  b.input = input;
  b.bytes = bytes;
  b.file_offset = size_;
  b.span = RoundUp(std::max<uint64_t>(bytes, 1), PageSize());
  b.lead = b.span - RoundUp(bytes, 64);
  size_ += b.span;
  buffers_.push_back(b);
  return static_cast<int>(buffers_.size()) - 1;
}

nlohmann::json ToJson(const BufferPlace& b) {
  return {{"name", b.name}, {"input", b.input}, {"file_offset", b.file_offset}, {"span", b.span},
          {"lead", b.lead}, {"bytes", b.bytes}};
}

BufferPlace BufferPlaceFromJson(const nlohmann::json& j) {
  BufferPlace b;
  b.name = j.at("name").get<std::string>();
  b.input = j.at("input").get<bool>();
  b.file_offset = j.at("file_offset").get<uint64_t>();
  b.span = j.at("span").get<uint64_t>();
  b.lead = j.at("lead").get<uint64_t>();
  b.bytes = j.at("bytes").get<uint64_t>();
  return b;
}

}  // namespace kernelgym
