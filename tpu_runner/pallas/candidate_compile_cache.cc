#include "tpu_runner/pallas/candidate_compile_cache.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "core/digest.h"

namespace kernelgym {

namespace {

constexpr int kEntryFormat = 1;

std::optional<std::string> ReadWhole(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

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
  return Sha256Hex({key.Material()}) + ".json";
}

std::optional<judge::CompileFacts> CandidateCompileCache::Find(const CandidateCompileKey& key) {
  if (!IsProgramKey(key.program)) return std::nullopt;
  const std::string material = key.Material();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = memory_.find(material); it != memory_.end()) return it->second;
  }
  if (dir_.empty()) return std::nullopt;
  const std::optional<std::string> text = ReadWhole(dir_ / FileName(key));
  if (!text) return std::nullopt;
  // An entry counts only when it says, in full, that it is for this material, and its facts read
  // as the protocol's (strictly: a field missing or of another type is no entry).
  const nlohmann::json entry = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!entry.is_object() || entry.value("format", 0) != kEntryFormat || !entry.contains("material") ||
      !entry["material"].is_string() || entry["material"].get<std::string>() != material || !entry.contains("facts"))
    return std::nullopt;
  std::string error;
  const std::optional<judge::Message> decoded = judge::Decode(entry["facts"], error);
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
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) return;  // a cache: without it the next evaluation compiles again
  const nlohmann::json entry = {{"format", kEntryFormat}, {"material", material}, {"facts", judge::ToJson(facts)}};
  // Written beside and renamed over: a reader sees a whole entry or none.
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path file = dir_ / FileName(key);
  const std::filesystem::path partial =
      dir_ / (file.filename().string() + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out << entry.dump() << "\n";
    if (!out.flush()) {
      std::filesystem::remove(partial, ec);
      return;
    }
  }
  std::filesystem::rename(partial, file, ec);
  if (ec) std::filesystem::remove(partial, ec);
}

}  // namespace kernelgym
