#include "datasets/trajectory/segments.h"

#include <algorithm>
#include <cstdio>

namespace kernelgym {

namespace {
constexpr std::string_view kPrefix = "segment-";
constexpr std::string_view kSuffix = ".jsonl";
}  // namespace

std::string SegmentFileName(uint64_t number) {
  char digits[32];
  std::snprintf(digits, sizeof(digits), "%06llu", static_cast<unsigned long long>(number));
  return std::string(kPrefix) + digits + std::string(kSuffix);
}

std::optional<uint64_t> ParseSegmentFileName(const std::string& name) {
  if (name.size() <= kPrefix.size() + kSuffix.size()) return std::nullopt;
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  if (name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) return std::nullopt;
  const std::string digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() < 6 || digits.size() > 19) return std::nullopt;
  uint64_t number = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    number = number * 10 + static_cast<uint64_t>(c - '0');
  }
  // Only the canonical spelling, so two names never claim the same number.
  if (number == 0 || SegmentFileName(number) != name) return std::nullopt;
  return number;
}

std::vector<Segment> ListSegments(const std::filesystem::path& dir, std::string& error) {
  std::vector<Segment> segments;
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    error = dir.string() + ": " + ec.message();
    return {};
  }
  for (const std::filesystem::directory_entry& entry : it) {
    std::optional<uint64_t> number = ParseSegmentFileName(entry.path().filename().string());
    if (!number) continue;
    std::error_code type_ec;
    if (!entry.is_regular_file(type_ec)) continue;
    segments.push_back({*number, entry.path()});
  }
  std::sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) { return a.number < b.number; });
  return segments;
}

}  // namespace kernelgym
