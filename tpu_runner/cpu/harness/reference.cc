#include "tpu_runner/cpu/harness/reference.h"

#include <omp.h>
#include <torch/script.h>
#include <torch/torch.h>

#include <cstring>
#include <vector>

namespace kernelgym {
namespace {

c10::ScalarType ScalarOf(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return torch::kFloat32;
    case DType::kFloat64: return torch::kFloat64;
    case DType::kInt32: return torch::kInt32;
    case DType::kInt64: return torch::kInt64;
  }
  return torch::kFloat32;
}

}  // namespace

struct Reference::Impl {
  std::shared_ptr<torch::jit::CompilationUnit> unit;
  torch::jit::Function* function = nullptr;
  int threads = 1;
  std::vector<TensorSpec> inputs, outputs;
  std::vector<std::vector<torch::jit::IValue>> args{2};
  std::vector<torch::Tensor> result;
};

Reference::~Reference() = default;

std::unique_ptr<Reference> Reference::Create(const std::string& source, int threads, const std::vector<TensorSpec>& inputs,
                                             const std::vector<TensorSpec>& outputs, std::string& error) {
  std::unique_ptr<Reference> ref(new Reference());
  ref->impl_ = std::make_unique<Impl>();
  Impl& impl = *ref->impl_;
  impl.threads = threads;
  impl.inputs = inputs;
  impl.outputs = outputs;
  torch::set_num_threads(threads);
  try {
    impl.unit = torch::jit::compile(source);
    impl.function = &impl.unit->get_function("reference");
  } catch (const std::exception& e) {
    error = std::string("reference.py does not compile as TorchScript: ") + e.what();
    return nullptr;
  }
  return ref;
}

void Reference::BindInputs(int set, const std::vector<std::span<std::byte>>& buffers) {
  Impl& impl = *impl_;
  impl.args[set].clear();
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const TensorSpec& spec = impl.inputs[i];
    impl.args[set].emplace_back(torch::from_blob(buffers[i].data(), spec.shape, torch::TensorOptions().dtype(ScalarOf(spec.dtype))));
  }
}

bool Reference::Run(int set, std::string& error) {
  Impl& impl = *impl_;
  try {
    torch::jit::IValue value = (*impl.function)(impl.args[set]);
    impl.result.clear();
    if (value.isTensor()) {
      impl.result.push_back(value.toTensor());
    } else if (value.isTuple()) {
      for (const auto& element : value.toTuple()->elements()) impl.result.push_back(element.toTensor());
    } else {
      error = "reference returned neither a Tensor nor a tuple of Tensors";
      return false;
    }
  } catch (const std::exception& e) {
    error = std::string("reference raised: ") + e.what();
    return false;
  }
  if (impl.result.size() != impl.outputs.size()) {
    error = "reference returned " + std::to_string(impl.result.size()) + " tensors; task.json declares " +
            std::to_string(impl.outputs.size()) + " outputs";
    return false;
  }
  for (std::size_t i = 0; i < impl.result.size(); ++i) {
    const TensorSpec& spec = impl.outputs[i];
    torch::Tensor& t = impl.result[i];
    if (t.scalar_type() != ScalarOf(spec.dtype) || t.sizes().vec() != spec.shape) {
      error = "reference output " + std::to_string(i) + " has dtype " + std::string(c10::toString(t.scalar_type())) +
              " and shape " + c10::str(t.sizes()) + "; task.json declares '" + spec.name + "' as " +
              std::string(DTypeName(spec.dtype)) + " " + c10::str(c10::IntArrayRef(spec.shape));
      return false;
    }
    if (!t.is_contiguous()) t = t.contiguous();
  }
  return true;
}

void Reference::CopyOutputs(const std::vector<std::span<std::byte>>& out) {
  for (std::size_t i = 0; i < out.size() && i < impl_->result.size(); ++i)
    std::memcpy(out[i].data(), impl_->result[i].data_ptr(), out[i].size());
}

void Reference::ResetThreads() const { omp_set_num_threads(impl_->threads); }

}  // namespace kernelgym
