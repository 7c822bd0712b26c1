#include "tpu_runner/pallas/content_entry.h"

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iterator>

#include "core/digest.h"

namespace kernelgym {

std::filesystem::path ContentEntryFile(const std::filesystem::path& dir, const std::string& material) {
  return dir / (Sha256Hex({material}) + ".json");
}

std::optional<nlohmann::json> ReadContentEntry(const std::filesystem::path& dir, const std::string& material,
                                               int format, const std::string& field) {
  std::ifstream in(ContentEntryFile(dir, material), std::ios::binary);
  if (!in) return std::nullopt;
  const std::string text(std::istreambuf_iterator<char>(in), {});
  const nlohmann::json entry = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!entry.is_object() || entry.value("format", 0) != format || !entry.contains("material") ||
      !entry["material"].is_string() || entry["material"].get<std::string>() != material || !entry.contains(field))
    return std::nullopt;
  return entry[field];
}

void WriteContentEntry(const std::filesystem::path& dir, const std::string& material, int format,
                       const std::string& field, const nlohmann::json& payload) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return;
  const nlohmann::json entry = {{"format", format}, {"material", material}, {field, payload}};
  static std::atomic<uint64_t> counter{0};
  const std::filesystem::path file = ContentEntryFile(dir, material);
  const std::filesystem::path partial =
      dir / (file.filename().string() + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
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
