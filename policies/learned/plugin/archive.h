// A model file: one torch archive holding the module's parameters, the optimizer's state and
// three JSON strings (kind + config, the feature layout, provenance). Header-only so each model's
// translation unit is the only one that includes torch (a torch TU costs ~13 s and 1.3 GB to
// compile, PLATFORM.md).
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <system_error>

#include "policies/learned/feature_layout.h"

namespace kernelgym::learned::plugin {

// One intra-op thread: the networks are small (a batch times 64 units), and with one thread every
// reduction runs in the same order, so training is deterministic given the seed and the data.
inline void UseOneThread() { torch::set_num_threads(1); }

// c10::Error's what() carries a C++ stack trace after the first line: the message only.
inline std::string FirstLine(const std::exception& e) {
  std::string what = e.what();
  if (const auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
  return what;
}

struct ArchiveHeader {
  std::string kind;
  nlohmann::json config;  // the network's shape: {"hidden": N}
  FeatureLayout layout;
  nlohmann::json info;
};

// Written under a temporary name and renamed: a crash mid-save never leaves a torn model file.
inline bool SaveArchive(const std::filesystem::path& file, const ArchiveHeader& header, const torch::nn::Module& module,
                        const torch::optim::Optimizer& optimizer, std::string& error) {
  try {
    torch::serialize::OutputArchive archive;
    module.save(archive);
    torch::serialize::OutputArchive optimizer_archive;
    optimizer.save(optimizer_archive);
    archive.write("optimizer", optimizer_archive);
    archive.write("kernelgym.kind", torch::IValue(header.kind));
    archive.write("kernelgym.config", torch::IValue(header.config.dump()));
    archive.write("kernelgym.layout", torch::IValue(header.layout.ToJson().dump()));
    archive.write("kernelgym.info", torch::IValue(header.info.dump()));
    if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
    const std::filesystem::path tmp = file.string() + ".tmp";
    archive.save_to(tmp.string());
    std::error_code ec;
    std::filesystem::rename(tmp, file, ec);
    if (ec) {
      error = "cannot rename " + tmp.string() + " to " + file.string() + ": " + ec.message();
      return false;
    }
    return true;
  } catch (const std::exception& e) {
    error = "cannot save " + file.string() + ": " + e.what();
    return false;
  }
}

// Reads the header of a model file of `kind`; the parameters stay in `archive` for the module.
inline std::optional<ArchiveHeader> LoadArchive(const std::filesystem::path& file, const std::string& kind,
                                                torch::serialize::InputArchive& archive, std::string& error) {
  if (!std::filesystem::is_regular_file(file)) {
    error = file.string() + ": no such model file";
    return std::nullopt;
  }
  ArchiveHeader header;
  try {
    archive.load_from(file.string());
    torch::IValue value;
    if (!archive.try_read("kernelgym.kind", value) || !value.isString()) {
      error = file.string() + " is a torch archive but not a kernelgym model (no kind)";
      return std::nullopt;
    }
    header.kind = value.toStringRef();
    if (header.kind != kind) {
      error = file.string() + " is a " + header.kind + ", not a " + kind;
      return std::nullopt;
    }
    archive.read("kernelgym.config", value);
    header.config = nlohmann::json::parse(value.toStringRef());
    archive.read("kernelgym.info", value);
    header.info = nlohmann::json::parse(value.toStringRef());
    archive.read("kernelgym.layout", value);
    std::string layout_error;
    auto layout = FeatureLayout::FromJson(nlohmann::json::parse(value.toStringRef()), layout_error);
    if (!layout) {
      error = file.string() + ": " + layout_error;
      return std::nullopt;
    }
    header.layout = std::move(*layout);
  } catch (const std::exception& e) {
    error = "cannot read the model file " + file.string() + ": " + FirstLine(e);
    return std::nullopt;
  }
  return header;
}

// A model file of `kind` loaded into the model `make(header)` builds: the weights, then the
// optimizer's state (so training can go on from a checkpoint). nullptr with `error`.
template <typename Model, typename Make>
std::unique_ptr<Model> LoadModel(const std::filesystem::path& file, const std::string& kind, std::string& error,
                                 Make make) {
  UseOneThread();
  torch::serialize::InputArchive archive;
  std::optional<ArchiveHeader> header = LoadArchive(file, kind, archive, error);
  if (!header) return nullptr;
  try {
    std::unique_ptr<Model> model = make(*header);
    model->net()->load(archive);
    torch::serialize::InputArchive optimizer_archive;
    if (archive.try_read("optimizer", optimizer_archive)) model->optimizer().load(optimizer_archive);
    return model;
  } catch (const std::exception& e) {
    error = file.string() + ": the weights do not fit the network its header describes: " + FirstLine(e);
    return nullptr;
  }
}

// Rows [batch][items][width] as one zero-padded tensor [B, max items, width] and its mask [B, max].
inline std::pair<torch::Tensor, torch::Tensor> PadRows(const std::vector<const std::vector<std::vector<float>>*>& rows,
                                                       std::size_t width) {
  std::size_t most = 1;
  for (const auto* r : rows) most = std::max(most, r->size());
  const auto batch = static_cast<int64_t>(rows.size());
  torch::Tensor data = torch::zeros({batch, static_cast<int64_t>(most), static_cast<int64_t>(width)});
  torch::Tensor mask = torch::zeros({batch, static_cast<int64_t>(most)}, torch::kBool);
  auto d = data.accessor<float, 3>();
  auto m = mask.accessor<bool, 2>();
  for (int64_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < rows[b]->size(); ++i) {
      m[b][static_cast<int64_t>(i)] = true;
      const std::vector<float>& row = (*rows[b])[i];
      for (std::size_t j = 0; j < width && j < row.size(); ++j) d[b][static_cast<int64_t>(i)][static_cast<int64_t>(j)] = row[j];
    }
  return {data, mask};
}

inline torch::Tensor Stack(const std::vector<const std::vector<float>*>& rows, std::size_t width) {
  torch::Tensor out = torch::zeros({static_cast<int64_t>(rows.size()), static_cast<int64_t>(width)});
  auto a = out.accessor<float, 2>();
  for (std::size_t b = 0; b < rows.size(); ++b)
    for (std::size_t j = 0; j < width && j < rows[b]->size(); ++j) a[static_cast<int64_t>(b)][static_cast<int64_t>(j)] = (*rows[b])[j];
  return out;
}

inline torch::Tensor Vector(const std::vector<float>& values) {
  return torch::tensor(std::vector<float>(values.begin(), values.end()), torch::kFloat32);
}

}  // namespace kernelgym::learned::plugin
