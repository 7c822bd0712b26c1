#include "env/episode/source_edits.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "core/subprocess.h"

namespace kernelgym {
namespace {

std::size_t CountOccurrences(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) ++count;
  return count;
}

std::string Preview(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > 60) line = line.substr(0, 57) + "...";
  return line;
}

}  // namespace

EditOutcome ApplyEdits(const std::string& source, const std::vector<protocol::EditBlock>& edits) {
  EditOutcome out;
  if (edits.empty()) {
    out.error = "edit: no blocks";
    return out;
  }
  std::string current = source;
  for (std::size_t i = 0; i < edits.size(); ++i) {
    const protocol::EditBlock& block = edits[i];
    const std::string where = "edit block " + std::to_string(i) + " (search \"" + Preview(block.search) + "\")";
    if (block.search.empty()) {
      out.error = where + ": the search text is empty";
      return out;
    }
    const std::size_t n = CountOccurrences(current, block.search);
    if (n != 1) {
      out.error = where + (n == 0 ? ": not found in the current source" : ": matches " + std::to_string(n) +
                                                                             " places; make it unique");
      return out;
    }
    current.replace(current.find(block.search), block.search.size(), block.replace);
  }
  out.source = std::move(current);
  return out;
}

EditOutcome ApplyPatch(const std::string& source, const std::string& diff) {
  EditOutcome out;
  if (diff.find("@@") == std::string::npos) {
    out.error = "patch: not a unified diff (no @@ hunk header)";
    return out;
  }
  namespace fs = std::filesystem;
  std::mt19937_64 rng(std::random_device{}());
  const fs::path dir = fs::temp_directory_path() / ("kernelgym-patch-" + std::to_string(getpid()) + "-" + std::to_string(rng()));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    out.error = "patch: cannot create a work folder: " + ec.message();
    return out;
  }
  std::ofstream(dir / "kernel.cpp", std::ios::binary) << source;
  std::ofstream(dir / "change.diff", std::ios::binary) << diff;
  SpawnOptions options;
  // -o: write here whatever the headers say; -F0: no fuzz; -r -: no reject files; -t: never ask.
  options.argv = {"/usr/bin/patch", "-s", "-t", "-F0", "-N", "--no-backup-if-mismatch", "-r", "-",
                  "-i", (dir / "change.diff").string(), "-o", (dir / "patched.cpp").string(), (dir / "kernel.cpp").string()};
  options.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  options.limits.file_size = std::size_t{16} << 20;
  const ProcessResult r = RunProcess(options, 10);
  if (r.ok()) {
    std::ifstream in(dir / "patched.cpp", std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    out.source = ss.str();
  } else {
    // The message goes into the observation, which must be the same for the same action: no
    // wall time, no work-folder path.
    std::string why = HeadLines(r.stdout_text + r.stderr_text, 4);
    for (std::size_t at; (at = why.find(dir.string())) != std::string::npos;) why.replace(at, dir.string().size(), ".");
    while (!why.empty() && why.back() == '\n') why.pop_back();
    const std::string how = r.timed_out || r.signal != 0 || !r.started ? r.Describe(10) : "exit " + std::to_string(r.exit_code);
    out.error = "patch: does not apply (" + how + ")" + (why.empty() ? "" : ": " + why);
  }
  fs::remove_all(dir, ec);
  return out;
}

}  // namespace kernelgym
