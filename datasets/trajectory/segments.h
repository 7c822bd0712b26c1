// The store's on-disk layout: a folder of segment files "segment-000001.jsonl", "segment-000002.jsonl",
// ... numbered from 1 in the order they were created. Segments are append-only and written by one
// recorder each; a recorder that opens a store starts a new segment after the highest existing
// one and never appends to an old one (so a torn tail left by a crash stays the last line of its
// segment). Other files in the folder are ignored.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kernelgym {

struct Segment {
  uint64_t number = 0;
  std::filesystem::path path;
};

// "segment-000042.jsonl" (at least six digits; more once the number needs them).
std::string SegmentFileName(uint64_t number);

// The number in a segment file name; nullopt for any other name.
std::optional<uint64_t> ParseSegmentFileName(const std::string& file_name);

// The store's segments in number order. A folder that cannot be listed gives `error` (the
// path and the reason) and an empty list.
std::vector<Segment> ListSegments(const std::filesystem::path& dir, std::string& error);

}  // namespace kernelgym
