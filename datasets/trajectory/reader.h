// Reads a trajectory store (a folder of JSONL segments, see segments.h) record by record, in
// segment order and line order. Bad data is counted, never thrown:
//   - torn: the LAST line of a segment that is not a complete record — no newline at its end, or
//     not a JSON object. That is what a kill -9 or a power loss leaves in the segment that was
//     being written (and what a reader sees at the tail of a segment still being written). The
//     recorder never reported such a line durable, so skipping it loses nothing acknowledged.
//   - corrupt: any other line that is not a JSON object; it is reported with its file:line.
// Only JSON validity is checked here; what a record must contain is record_schema.h's business
// and the exporters tolerate missing fields.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "datasets/trajectory/segments.h"

namespace kernelgym {

struct ReadProblem {
  std::filesystem::path segment;
  uint64_t line = 0;  // 1-based; 0: the whole segment (it could not be opened)
  bool torn = false;
  std::string message;

  // "<segment>:<line>: torn last line: <message>" or "...: corrupt line: ...".
  std::string Describe() const;
};

struct ReaderStats {
  uint64_t segments = 0;              // segments opened
  uint64_t bytes = 0;                 // bytes read from them
  uint64_t records = 0;               // records returned by Next
  uint64_t torn = 0;                  // torn last lines skipped
  uint64_t corrupt = 0;               // corrupt lines skipped
  uint64_t unreadable = 0;            // segments that could not be opened
  std::vector<ReadProblem> problems;  // the first kMaxProblems torn / corrupt / unreadable
  static constexpr std::size_t kMaxProblems = 100;
};

class TrajectoryReader {
 public:
  // Lists the store's segments now (segments created later are not read). A folder that cannot
  // be listed leaves ok() false with error(); Next then returns false at once.
  explicit TrajectoryReader(const std::filesystem::path& dir);

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::vector<Segment>& segments() const { return segments_; }

  // The next record (a JSON object); false once every segment is read.
  bool Next(nlohmann::json& record);

  // Where the record Next returned last came from.
  const std::filesystem::path& segment() const { return current_path_; }
  uint64_t line() const { return line_; }

  const ReaderStats& stats() const { return stats_; }

 private:
  void AddProblem(uint64_t line, bool torn, std::string message);

  std::string error_;
  std::vector<Segment> segments_;
  std::size_t next_segment_ = 0;
  std::ifstream in_;
  std::filesystem::path current_path_;
  uint64_t line_ = 0;
  ReaderStats stats_;
};

}  // namespace kernelgym
