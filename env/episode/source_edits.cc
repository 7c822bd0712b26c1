#include "env/episode/source_edits.h"

#include <unistd.h>

#include <algorithm>
#include <cstddef>
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

namespace {

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

// A hunk as the model wrote it. Its counts are not trusted, so its body runs to the next hunk or
// to the first line that cannot belong to a hunk.
struct Hunk {
  std::size_t number = 0;         // 1-based, as GNU patch numbers hunks
  std::string header;             // the "@@ ... @@" line as written
  std::vector<std::string> body;  // every line starts with ' ', '-', '+' or '\'
};

struct SplitDiff {
  std::vector<std::string> before;  // file headers, or anything else a model put before the first hunk
  std::vector<Hunk> hunks;
  std::vector<std::string> after;  // a closing code fence, a remark
};

bool IsHunkHeader(const std::string& line) { return line.rfind("@@", 0) == 0; }
bool IsContext(const std::string& line) { return !line.empty() && line[0] == ' '; }
bool IsChange(const std::string& line) { return !line.empty() && (line[0] == '-' || line[0] == '+'); }
bool IsOld(const std::string& line) { return !line.empty() && (line[0] == ' ' || line[0] == '-'); }

// "--- a/x" above "+++ b/x" starts a file, where a removed line "-- a/x" would be read otherwise.
bool StartsAFile(const std::vector<std::string>& lines, std::size_t i) {
  return lines[i].rfind("diff ", 0) == 0 ||
         (lines[i].rfind("--- ", 0) == 0 && i + 1 < lines.size() && lines[i + 1].rfind("+++ ", 0) == 0);
}

bool CanBeInHunk(const std::vector<std::string>& lines, std::size_t i) {
  const std::string& line = lines[i];
  if (line.empty()) return true;  // an empty context line that lost its leading space
  if (IsHunkHeader(line) || StartsAFile(lines, i)) return false;
  return line[0] == ' ' || line[0] == '-' || line[0] == '+' || line[0] == '\\';
}

// Changes after the hunks would be silently dropped by GNU patch (the counts say where a hunk
// ends); without trusted counts they mean the hunks were not read as the model meant them.
std::string WhyTheTailIsNotSpacing(const std::vector<std::string>& lines, std::size_t tail, std::size_t hunks) {
  const bool hunk_or_change_follows =
      std::any_of(lines.begin() + static_cast<std::ptrdiff_t>(tail), lines.end(),
                  [](const std::string& line) { return IsHunkHeader(line) || IsChange(line); });
  if (!hunk_or_change_follows) return "";
  const std::string where = "line " + std::to_string(tail + 1) + " of the diff (\"" + Preview(lines[tail]) + "\")";
  if (StartsAFile(lines, tail)) return where + " starts a second file; the patch action changes one source";
  return where + " is inside hunk " + std::to_string(hunks) +
         " but starts with none of ' ', '-', '+' (an empty context line is \" \")";
}

std::optional<SplitDiff> SplitIntoHunks(const std::string& diff, std::string& why) {
  const std::vector<std::string> lines = SplitLines(diff);
  SplitDiff split;
  std::size_t i = 0;
  for (; i < lines.size() && !IsHunkHeader(lines[i]); ++i) split.before.push_back(lines[i]);
  while (i < lines.size() && IsHunkHeader(lines[i])) {
    Hunk hunk{split.hunks.size() + 1, lines[i++], {}};
    std::size_t end = i;
    while (end < lines.size() && CanBeInHunk(lines, end)) ++end;
    // Blank lines at the end of a hunk are more likely spacing than context; dropping context
    // never changes what a hunk does, only how sure its place is.
    std::size_t last = end;
    while (last > i && lines[last - 1].empty()) --last;
    for (; i < last; ++i) hunk.body.push_back(lines[i].empty() ? " " : lines[i]);
    i = end;
    split.hunks.push_back(std::move(hunk));
  }
  why = i < lines.size() ? WhyTheTailIsNotSpacing(lines, i, split.hunks.size()) : "";
  if (!why.empty()) return std::nullopt;
  split.after.assign(lines.begin() + static_cast<std::ptrdiff_t>(i), lines.end());
  return split;
}

std::vector<std::string> OldLines(const Hunk& hunk) {
  std::vector<std::string> old;
  for (const std::string& line : hunk.body)
    if (IsOld(line)) old.push_back(line.substr(1));
  return old;
}

std::size_t CountLinesStartingWith(const Hunk& hunk, char first) {
  return static_cast<std::size_t>(
      std::count_if(hunk.body.begin(), hunk.body.end(), [first](const std::string& line) { return line[0] == first; }));
}

// 0-based indices where `block` equals consecutive whole lines of `lines`.
std::vector<std::size_t> PlacesOf(const std::vector<std::string>& block, const std::vector<std::string>& lines) {
  std::vector<std::size_t> places;
  for (std::size_t at = 0; at + block.size() <= lines.size(); ++at)
    if (std::equal(block.begin(), block.end(), lines.begin() + static_cast<std::ptrdiff_t>(at))) places.push_back(at);
  return places;
}

std::string Describe(const Hunk& hunk, const std::vector<std::string>& old) {
  const auto shown = std::find_if(old.begin(), old.end(), [](const std::string& line) {
    return line.find_first_not_of(" \t\r") != std::string::npos;
  });
  return "hunk " + std::to_string(hunk.number) + " (context \"" + Preview(shown == old.end() ? "" : *shown) + "\")";
}

std::string WhyNotPlaced(const Hunk& hunk, const std::vector<std::string>& old, std::size_t places) {
  if (places == 0) return Describe(hunk, old) + " is not in the current source";
  return Describe(hunk, old) + " matches " + std::to_string(places) +
         " places in the current source; add context lines to make it unique";
}

// With no fuzz, GNU patch takes a hunk with less context after its changes than before them for
// the end of a file and refuses it anywhere else. Once the hunk is placed, leading context beyond
// the trailing amount has done its work, so it goes.
std::size_t SurplusLeadingContext(const Hunk& hunk) {
  const auto first_not_context = std::find_if_not(hunk.body.begin(), hunk.body.end(), IsContext);
  if (first_not_context == hunk.body.end()) return 0;  // no change: nothing to pin
  const auto leading = static_cast<std::size_t>(first_not_context - hunk.body.begin());
  std::size_t trailing = 0;
  for (auto line = hunk.body.rbegin(); line != hunk.body.rend() && !IsChange(*line); ++line)
    if (IsContext(*line)) ++trailing;
  return leading > trailing ? leading - trailing : 0;
}

// The text after the header's closing "@@" (often the enclosing function) is kept for readers.
std::string HeaderTail(const std::string& header) {
  const std::size_t close = header.find("@@", 2);
  return close == std::string::npos ? "" : header.substr(close + 2);
}

// `first` is the 1-based line where the old text starts (or would, when it is empty); `shift` is
// how many lines the hunks above add.
std::string HunkHeader(std::size_t first, std::size_t old_count, std::ptrdiff_t shift, std::size_t new_count,
                       const std::string& tail) {
  // An empty range is named by the line before it, as diff writes it; for the old side of an
  // insertion without context that is where GNU patch puts it.
  const auto start = [](std::ptrdiff_t line, std::size_t count) {
    return std::to_string(count == 0 ? line - 1 : line);
  };
  const auto old_first = static_cast<std::ptrdiff_t>(first);
  return "@@ -" + start(old_first, old_count) + "," + std::to_string(old_count) + " +" +
         start(old_first + shift, new_count) + "," + std::to_string(new_count) + " @@" + tail;
}

// The hunk as GNU patch should read it, its old text starting at source line `place` (0-based);
// `shift` is how many lines the hunks above it add.
std::vector<std::string> PlacedAt(const Hunk& hunk, std::size_t place, std::ptrdiff_t shift) {
  const std::size_t added = CountLinesStartingWith(hunk, '+');
  const std::size_t removed = CountLinesStartingWith(hunk, '-');
  // GNU patch calls a hunk without changes malformed; placed, it has nothing left to say.
  if (added == 0 && removed == 0) return {};
  const std::size_t surplus = SurplusLeadingContext(hunk);
  const std::size_t old_count = OldLines(hunk).size() - surplus;
  std::vector<std::string> lines = {
      HunkHeader(place + surplus + 1, old_count, shift, old_count - removed + added, HeaderTail(hunk.header))};
  lines.insert(lines.end(), hunk.body.begin() + static_cast<std::ptrdiff_t>(surplus), hunk.body.end());
  return lines;
}

// One run of GNU patch on `diff` against `source`, in a work folder of its own.
EditOutcome RunPatch(const std::string& source, const std::string& diff) {
  EditOutcome out;
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

}  // namespace

std::optional<std::string> RecountHunks(const std::string& source, const std::string& diff, std::string& why) {
  why.clear();
  std::optional<SplitDiff> split = SplitIntoHunks(diff, why);
  if (!split || split->hunks.empty()) return std::nullopt;
  if (std::none_of(split->hunks.begin(), split->hunks.end(),
                   [](const Hunk& hunk) { return std::any_of(hunk.body.begin(), hunk.body.end(), IsChange); })) {
    why = "no hunk adds or removes a line";
    return std::nullopt;
  }
  const std::vector<std::string> source_lines = SplitLines(source);
  std::vector<std::string> out = split->before;
  std::ptrdiff_t shift = 0;   // lines added minus lines removed by the hunks so far
  std::size_t free_from = 0;  // the first source line after the last placed hunk
  const Hunk* last_placed = nullptr;
  for (const Hunk& hunk : split->hunks) {
    const std::vector<std::string> old = OldLines(hunk);
    const std::ptrdiff_t growth = static_cast<std::ptrdiff_t>(CountLinesStartingWith(hunk, '+')) -
                                  static_cast<std::ptrdiff_t>(CountLinesStartingWith(hunk, '-'));
    // Nothing to find it by: where it goes is the model's word. An empty one GNU patch would call
    // malformed.
    if (old.empty()) {
      if (growth == 0) continue;
      out.push_back(hunk.header);
      out.insert(out.end(), hunk.body.begin(), hunk.body.end());
      shift += growth;
      continue;
    }
    const std::vector<std::size_t> places = PlacesOf(old, source_lines);
    if (places.size() != 1) {
      why = WhyNotPlaced(hunk, old, places.size());
      return std::nullopt;
    }
    if (places[0] < free_from) {
      why = Describe(hunk, old) + " is above or overlaps hunk " + std::to_string(last_placed->number) +
            " in the current source; hunks must follow the source's order without sharing lines";
      return std::nullopt;
    }
    const std::vector<std::string> placed = PlacedAt(hunk, places[0], shift);
    out.insert(out.end(), placed.begin(), placed.end());
    shift += growth;
    free_from = places[0] + old.size();
    last_placed = &hunk;
  }
  out.insert(out.end(), split->after.begin(), split->after.end());
  std::string text;
  for (const std::string& line : out) text += line + "\n";
  return text;
}

EditOutcome ApplyPatch(const std::string& source, const std::string& diff) {
  if (diff.find("@@") == std::string::npos) return {std::nullopt, "patch: not a unified diff (no @@ hunk header)"};
  // The action changes one source; GNU patch given two files' sections with -o would write both
  // results, one after the other, into it.
  const std::vector<std::string> lines = SplitLines(diff);
  int files = 0;
  for (std::size_t i = 0; i < lines.size(); ++i)
    if (lines[i].rfind("--- ", 0) == 0 && i + 1 < lines.size() && lines[i + 1].rfind("+++ ", 0) == 0) ++files;
  if (files > 1)
    return {std::nullopt, "patch: the diff changes " + std::to_string(files) +
                              " files; a patch action changes the one kernel source (send one file's hunks)"};
  std::string why;
  const std::optional<std::string> recounted = RecountHunks(source, diff, why);
  if (recounted) {
    EditOutcome out = RunPatch(source, *recounted);
    if (out.source || *recounted == diff) return out;
  }
  // As written, so that a diff whose headers were right applies as it always did, and the error
  // quotes lines of the diff the model sent.
  EditOutcome out = RunPatch(source, diff);
  if (!out.source && !why.empty()) out.error = "patch: " + why + " (as written, the diff does not apply either)";
  return out;
}

}  // namespace kernelgym
