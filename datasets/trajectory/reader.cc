#include "datasets/trajectory/reader.h"

#include <cerrno>
#include <cstring>

namespace kernelgym {

std::string ReadProblem::Describe() const {
  std::string where = segment.string();
  if (line > 0) where += ":" + std::to_string(line);
  return where + (torn ? ": torn last line: " : line > 0 ? ": corrupt line: " : ": ") + message;
}

TrajectoryReader::TrajectoryReader(const std::filesystem::path& dir) { segments_ = ListSegments(dir, error_); }

void TrajectoryReader::AddProblem(uint64_t line, bool torn, std::string message) {
  if (stats_.problems.size() < ReaderStats::kMaxProblems)
    stats_.problems.push_back({current_path_, line, torn, std::move(message)});
}

bool TrajectoryReader::Next(nlohmann::json& record) {
  for (;;) {
    if (!in_.is_open()) {
      if (next_segment_ >= segments_.size()) return false;
      current_path_ = segments_[next_segment_++].path;
      line_ = 0;
      in_.clear();
      in_.open(current_path_, std::ios::binary);
      if (!in_.is_open()) {
        ++stats_.unreadable;
        AddProblem(0, false, std::string("cannot open: ") + std::strerror(errno));
        continue;
      }
      ++stats_.segments;
    }

    std::string text;
    if (!std::getline(in_, text)) {
      in_.close();
      continue;
    }
    ++line_;
    const bool terminated = !in_.eof();
    stats_.bytes += text.size() + (terminated ? 1 : 0);
    const bool last = !terminated || in_.peek() == std::ifstream::traits_type::eof();

    std::string problem;
    try {
      record = nlohmann::json::parse(text);
      if (!record.is_object()) problem = std::string("a JSON ") + record.type_name() + ", not an object";
    } catch (const nlohmann::json::exception& e) {
      problem = e.what();
    }
    if (problem.empty() && !terminated) problem = "no newline at its end (the write was cut short)";
    if (problem.empty()) {
      ++stats_.records;
      return true;
    }
    if (last) {
      ++stats_.torn;
    } else {
      ++stats_.corrupt;
    }
    AddProblem(line_, last, problem);
  }
}

}  // namespace kernelgym
