#include "tpu_runner/pallas/reference_estimate_cache.h"

#include <algorithm>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/digest.h"
#include "tpu_runner/pallas/content_entry.h"

namespace kernelgym {

namespace {

constexpr int kEntryFormat = 1;

}  // namespace

std::string ReferenceEstimateKey::Material() const {
  std::ostringstream out;
  out << "kernelgym pallas reference estimate, entry format " << kEntryFormat << "\n"
      << "judge code: " << judge_code << "\n"
      << "packages: " << packages << "\n"
      << "target: " << target << " (" << device_kind << ")" << (on_tpu ? ", on a TPU" : ", deviceless") << "\n"
      << "jax: " << jax << "\n"
      << "task: " << task_id << " (layout " << layout << ", suite " << suite << ")\n"
      << "task files: " << task_files << "\n";
  return out.str();
}

ReferenceEstimateCache::ReferenceEstimateCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

std::string ReferenceEstimateCache::FileName(const ReferenceEstimateKey& key) {
  return ContentEntryFile({}, key.Material()).filename().string();
}

std::optional<judge::ReferenceEstimate> ReferenceEstimateCache::Find(const ReferenceEstimateKey& key) {
  const std::string material = key.Material();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = memory_.find(material); it != memory_.end()) return it->second;
  }
  if (dir_.empty()) return std::nullopt;
  // An entry counts only when it is this material's and its estimate reads as the protocol's
  // (strictly: a field missing or of another type is no entry).
  const std::optional<nlohmann::json> stored = ReadContentEntry(dir_, material, kEntryFormat, "reference");
  if (!stored) return std::nullopt;
  std::string error;
  const std::optional<judge::Message> decoded = judge::Decode(*stored, error);
  const auto* reference = decoded ? std::get_if<judge::Reference>(&*decoded) : nullptr;
  if (!reference || !reference->estimate || !reference->estimate->error.empty()) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  memory_[material] = *reference->estimate;
  return reference->estimate;
}

void ReferenceEstimateCache::Store(const ReferenceEstimateKey& key, const judge::ReferenceEstimate& estimate) {
  if (!estimate.error.empty()) return;
  const std::string material = key.Material();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    memory_[material] = estimate;
  }
  if (dir_.empty()) return;  // a cache: without an entry the next evaluation estimates again
  WriteContentEntry(dir_, material, kEntryFormat, "reference", judge::ToJson(judge::Reference{{}, estimate}));
}

std::string JudgeCodeDigest(const std::filesystem::path& package_dir) {
  return TaskFolderDigest(package_dir / "kernelgym_pallas");
}

std::string InstalledPackages(const std::filesystem::path& python) {
  // <venv>/bin/python -> <venv>/lib/python3.X/site-packages/*.dist-info: jax, jaxlib, libtpu and
  // the rest, by name and version (a changed libtpu prices the same program differently).
  const std::filesystem::path venv = python.parent_path().parent_path();
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& lib : std::filesystem::directory_iterator(venv / "lib", ec)) {
    std::error_code inner;
    for (const auto& entry : std::filesystem::directory_iterator(lib.path() / "site-packages", inner)) {
      const std::string name = entry.path().filename().string();
      if (name.size() > 10 && name.ends_with(".dist-info")) names.push_back(name.substr(0, name.size() - 10));
    }
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : " ") + name;
  return out.empty() ? "(none found under " + venv.string() + "/lib)" : out;
}

}  // namespace kernelgym
