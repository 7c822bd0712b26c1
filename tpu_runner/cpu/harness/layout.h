// Where each tensor of an evaluation lives in a shared-memory file (memfd), as the judge lays it
// out and tells the other processes. Offsets are page-aligned so that a process can map one
// tensor by itself (the executor maps each behind its own guard page); within its pages a tensor
// ends as close to the end as 64-byte alignment allows, so that running past it faults there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kernelgym {

struct BufferPlace {
  std::string name;       // the tensor's name (for messages: "wrote to input `x`")
  bool input = false;
  uint64_t file_offset = 0;  // page-aligned start of its pages in the file
  uint64_t span = 0;         // bytes of pages
  uint64_t lead = 0;         // the tensor starts this far into its pages
  uint64_t bytes = 0;
  uint64_t data_offset() const { return file_offset + lead; }
};

class FileLayout {
 public:
  // Appends a tensor; returns its index.
  int Add(const std::string& name, uint64_t bytes, bool input);
  const std::vector<BufferPlace>& buffers() const { return buffers_; }
  uint64_t size() const { return size_; }  // the file's size (at least one page)

 private:
  std::vector<BufferPlace> buffers_;
  uint64_t size_ = 0;
};

uint64_t PageSize();
uint64_t RoundUp(uint64_t n, uint64_t to);

nlohmann::json ToJson(const BufferPlace& b);
BufferPlace BufferPlaceFromJson(const nlohmann::json& j);  // throws nlohmann::json::exception

}  // namespace kernelgym
