// The bodies of `kernelgym dataset export` and `kernelgym dataset stats`, kept here so the
// command line (cli/kernelgym_main.cc) only parses flags and calls them. Exit codes: 0 done,
// 1 the output could not be written, 2 bad input (unknown format, store missing or unreadable).
// Torn and corrupt lines are not failures: they are skipped and reported.
#pragma once

#include <filesystem>
#include <ostream>
#include <string>

#include "datasets/trajectory/export.h"

namespace kernelgym {

// Writes `format` ("transitions" or "sft", docs/dataset.md) rows for every record of the store
// at `store` to `out` ("-" = standard output). A file is written under a temporary name next to
// `out` and renamed when complete, so a failed export never leaves a half file behind. A summary
// (rows, records, segments, torn / corrupt lines with their file:line) goes to `log`.
int RunDatasetExport(const std::filesystem::path& store, const std::string& format, const std::filesystem::path& out,
                     std::ostream& log, const ExportOptions& options = {});

// Prints the store's figures (docs/dataset.md, "Stats") to `out`, as text or as one JSON object.
// Errors go to the default logger.
int RunDatasetStats(const std::filesystem::path& store, bool as_json, std::ostream& out);

}  // namespace kernelgym
