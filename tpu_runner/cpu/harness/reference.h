// The task's TorchScript reference, behind a torch-free interface: the only translation unit
// that includes libtorch (each costs ~13 s and 1.3 GB to compile). It runs in a process of its
// own (reference_main.cc) that no candidate code can reach, so its results need no hiding.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "datasets/task.h"

namespace kernelgym {

class Reference {
 public:
  ~Reference();
  // Compiles `source` and binds it to the given input views (they must outlive this object).
  // Returns nullptr with `error` set when the source does not compile or lacks `reference`.
  static std::unique_ptr<Reference> Create(const std::string& source, int threads, const std::vector<TensorSpec>& inputs,
                                           const std::vector<TensorSpec>& outputs, std::string& error);

  // Binds input set `set` to these buffers (read-only views).
  void BindInputs(int set, const std::vector<std::span<std::byte>>& buffers);

  // Runs the reference on input set `set`. The result stays owned here until the next call.
  // Returns false with `error` on a shape/dtype mismatch or exception.
  bool Run(int set, std::string& error);
  // Copies the last result into `out` (one buffer per output). Outside timed regions.
  void CopyOutputs(const std::vector<std::span<std::byte>>& out);

  // Sets the intra-op thread count again: a kernel may have changed the OpenMP setting.
  void ResetThreads() const;

 private:
  Reference() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kernelgym
