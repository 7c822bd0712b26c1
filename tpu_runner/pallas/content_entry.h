// One entry of a cache kept by content on disk: a JSON file named by the SHA-256 of its material,
// which holds the material in full and one payload. Shared by the reference estimate cache and the
// candidate compile cache, each of which keeps its own typed entries in memory.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kernelgym {

// The file of the entry for `material` under `dir`.
std::filesystem::path ContentEntryFile(const std::filesystem::path& dir, const std::string& material);

// The payload under `field` of the entry for `material`, only when the file says in full that it
// is that material's, in entry format `format` (anything else, a torn or forged file, is no entry).
std::optional<nlohmann::json> ReadContentEntry(const std::filesystem::path& dir, const std::string& material,
                                               int format, const std::string& field);

// Writes the entry beside its file and renames it over: a reader sees a whole entry or none. A
// failure leaves no entry (a cache: the next evaluation computes again).
void WriteContentEntry(const std::filesystem::path& dir, const std::string& material, int format,
                       const std::string& field, const nlohmann::json& payload);

}  // namespace kernelgym
