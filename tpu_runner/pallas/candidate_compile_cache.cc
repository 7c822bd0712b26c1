#include "tpu_runner/pallas/candidate_compile_cache.h"

#include <nlohmann/json.hpp>

#include "core/digest.h"
#include "tpu_runner/pallas/content_entry.h"

namespace kernelgym {

namespace {

constexpr int kEntryFormat = 1;

}  // namespace

std::string CandidateCompileKey::Material() const {
  return "kernelgym pallas candidate compile, entry format " + std::to_string(kEntryFormat) + "\n" +
         evaluation.Material() + "program: " + program + "\n";
}

bool IsProgramKey(const std::string& key) {
  if (key.size() != 64) return false;
  for (char c : key)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

CandidateCompileCache::CandidateCompileCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

std::string CandidateCompileCache::FileName(const CandidateCompileKey& key) {
  return ContentEntryFile({}, key.Material()).filename().string();
}

std::optional<judge::CompileFacts> CandidateCompileCache::Find(const CandidateCompileKey& key) {
  if (!IsProgramKey(key.program)) return std::nullopt;
  const std::string material = key.Material();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = memory_.find(material); it != memory_.end()) return it->second;
  }
  if (dir_.empty()) return std::nullopt;
  // An entry counts only when it is this material's and its facts read as the protocol's
  // (strictly: a field missing or of another type is no entry).
  const std::optional<nlohmann::json> stored = ReadContentEntry(dir_, material, kEntryFormat, "facts");
  if (!stored) return std::nullopt;
  std::string error;
  const std::optional<judge::Message> decoded = judge::Decode(*stored, error);
  const auto* facts = decoded ? std::get_if<judge::CompileFacts>(&*decoded) : nullptr;
  if (!facts || !facts->tpu_compile) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  memory_[material] = *facts;
  return *facts;
}

void CandidateCompileCache::Store(const CandidateCompileKey& key, const judge::CompileFacts& facts) {
  if (!facts.tpu_compile || !IsProgramKey(key.program)) return;
  const std::string material = key.Material();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    memory_[material] = facts;
  }
  if (dir_.empty()) return;  // a cache: without an entry the next evaluation compiles again
  WriteContentEntry(dir_, material, kEntryFormat, "facts", judge::ToJson(facts));
}

}  // namespace kernelgym
