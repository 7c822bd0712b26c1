#include "datasets/trajectory/dataset_command.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>
#include <iostream>

#include "datasets/trajectory/export.h"
#include "datasets/trajectory/reader.h"
#include "datasets/trajectory/store_stats.h"

namespace kernelgym {

namespace {

// A store that does not exist is a mistake worth naming (a typo in the path), not an empty store.
bool CheckStore(const std::filesystem::path& store, std::string& error) {
  std::error_code ec;
  if (!std::filesystem::is_directory(store, ec)) {
    error = "trajectory store " + store.string() + " is not a directory" + (ec ? ": " + ec.message() : "");
    return false;
  }
  return true;
}

void LogProblems(const ReaderStats& stats, std::ostream& log) {
  for (const ReadProblem& problem : stats.problems) log << "  " << problem.Describe() << "\n";
  const uint64_t total = stats.torn + stats.corrupt + stats.unreadable;
  if (total > stats.problems.size()) log << "  ... and " << total - stats.problems.size() << " more\n";
}

}  // namespace

int RunDatasetExport(const std::filesystem::path& store, const std::string& format_name,
                     const std::filesystem::path& out, std::ostream& log, const ExportOptions& options) {
  const std::optional<ExportFormat> format = ParseExportFormat(format_name);
  if (!format) {
    log << "error: unknown export format '" << format_name << "' (transitions, sft, chat)\n";
    return 2;
  }
  std::string error;
  if (!CheckStore(store, error)) {
    log << "error: " << error << "\n";
    return 2;
  }
  TrajectoryReader reader(store);
  if (!reader.ok()) {
    log << "error: " << reader.error() << "\n";
    return 2;
  }

  ExportSummary summary;
  if (out == "-") {
    summary = ExportRecords(reader, *format, std::cout, options);
    std::cout.flush();
    if (!std::cout) {
      log << "error: writing to standard output failed\n";
      return 1;
    }
  } else {
    const std::filesystem::path partial = out.string() + ".partial-" + std::to_string(getpid());
    {
      std::ofstream file(partial, std::ios::binary | std::ios::trunc);
      if (!file) {
        log << "error: cannot create " << partial.string() << "\n";
        return 1;
      }
      summary = ExportRecords(reader, *format, file, options);
      file.close();
      if (!file) {
        log << "error: writing " << partial.string() << " failed\n";
        std::error_code ec;
        std::filesystem::remove(partial, ec);
        return 1;
      }
    }
    std::error_code ec;
    std::filesystem::rename(partial, out, ec);
    if (ec) {
      log << "error: cannot rename " << partial.string() << " to " << out.string() << ": " << ec.message() << "\n";
      std::filesystem::remove(partial, ec);
      return 1;
    }
  }

  const ReaderStats& read = reader.stats();
  log << "exported " << summary.rows << " " << ExportFormatName(*format) << " row(s) from " << summary.records
      << " record(s) in " << read.segments << " segment(s) to " << (out == "-" ? "standard output" : out.string())
      << "; " << read.torn << " torn line(s), " << read.corrupt << " corrupt line(s) skipped"
      << (options.dedup ? ", " + std::to_string(summary.duplicates) + " duplicate kernel(s) left out" : "") << "\n";
  LogProblems(read, log);
  return 0;
}

int RunDatasetStats(const std::filesystem::path& store, bool as_json, std::ostream& out) {
  std::string error;
  if (!CheckStore(store, error)) {
    spdlog::error("{}", error);
    return 2;
  }
  TrajectoryReader reader(store);
  if (!reader.ok()) {
    spdlog::error("{}", reader.error());
    return 2;
  }
  const StoreStats stats = ComputeStoreStats(reader);
  if (as_json) {
    out << StoreStatsToJson(stats).dump(2) << "\n";
  } else {
    out << RenderStoreStats(stats);
  }
  return out ? 0 : 1;
}

}  // namespace kernelgym
