// The `edit` action (env/episode/source_edits.h ApplyEdits: SEARCH/REPLACE blocks applied to the
// current source) on arbitrary sources and blocks. The `patch` action is applied by GNU patch in
// a child process, which a fuzzer must not spawn per input: only its in-process parts run here
// (the refusal of a diff without a hunk header, and RecountHunks, which rewrites hunk headers
// before GNU patch sees the diff); patch's own parsing is not fuzzed.
//
// Properties: no crash, leak or UB; exactly one of a source and an error; an error names the
// failing block; an applied edit is what a naive reference model (count the places the search
// text starts, replace the single one) gives; a recount keeps every change line, in order, and
// says why when it declines a diff that has a hunk.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "env/episode/source_edits.h"
#include "tests/fuzz/fuzz_check.h"

namespace kernelgym {
namespace {

// Where `needle` starts in `text`, overlapping matches included; at most two are needed.
std::vector<std::size_t> Starts(const std::string& text, const std::string& needle) {
  std::vector<std::size_t> starts;
  for (std::size_t i = 0; i + needle.size() <= text.size() && starts.size() < 2; ++i)
    if (text.compare(i, needle.size(), needle) == 0) starts.push_back(i);
  return starts;
}

// The reference model: the source after every block, or the index of the block that fails.
std::optional<std::string> Model(std::string source, const std::vector<protocol::EditBlock>& edits, std::size_t& failed) {
  for (std::size_t i = 0; i < edits.size(); ++i) {
    const std::vector<std::size_t> starts = edits[i].search.empty() ? std::vector<std::size_t>{} : Starts(source, edits[i].search);
    if (starts.size() != 1) {
      failed = i;
      return std::nullopt;
    }
    source = source.substr(0, starts[0]) + edits[i].replace + source.substr(starts[0] + edits[i].search.size());
  }
  return source;
}

// The lines that add or remove, in order: what a recount may move but never drop or invent.
std::vector<std::string> ChangeLines(const std::string& diff) {
  std::vector<std::string> changes;
  std::size_t begin = 0;
  while (begin < diff.size()) {
    const std::size_t end = std::min(diff.find('\n', begin), diff.size());
    if (diff[begin] == '+' || diff[begin] == '-') changes.push_back(diff.substr(begin, end - begin));
    begin = end + 1;
  }
  return changes;
}

}  // namespace
}  // namespace kernelgym

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kernelgym;
  FuzzedDataProvider in(data, size);
  const std::string source = in.ConsumeRandomLengthString(4096);
  std::vector<protocol::EditBlock> edits(in.ConsumeIntegralInRange<std::size_t>(0, 4));
  for (protocol::EditBlock& block : edits) {
    block.search = in.ConsumeRandomLengthString(256);
    block.replace = in.ConsumeRandomLengthString(256);
  }

  const EditOutcome out = ApplyEdits(source, edits);
  FUZZ_CHECK(out.source.has_value() == out.error.empty(), "exactly one of a source and an error");
  std::size_t failed = 0;
  const std::optional<std::string> expected = Model(source, edits, failed);
  if (edits.empty()) {
    FUZZ_CHECK(!out.source, "no blocks is an error");
  } else if (expected) {
    FUZZ_CHECK(out.source && *out.source == *expected, "applied edits differ from the model: " + out.error);
  } else {
    FUZZ_CHECK(!out.source, "block " + std::to_string(failed) + " should fail (empty, missing or ambiguous)");
    FUZZ_CHECK(out.error.rfind("edit block " + std::to_string(failed) + " ", 0) == 0,
               "the error names the failing block: " + out.error);
  }

  // The patch action's in-process check: a diff without a hunk header never reaches GNU patch.
  const std::string diff = in.ConsumeRemainingBytesAsString();
  if (diff.find("@@") == std::string::npos) {
    const EditOutcome patched = ApplyPatch(source, diff);
    FUZZ_CHECK(!patched.source && !patched.error.empty(), "a diff without @@ is refused in process");
  }

  std::string why = "stale";
  const std::optional<std::string> recounted = RecountHunks(source, diff, why);
  if (recounted) {
    FUZZ_CHECK(why.empty(), "a recount that succeeds leaves no reason: " + why);
    FUZZ_CHECK(ChangeLines(*recounted) == ChangeLines(diff), "a recount keeps every change line, in order");
  } else if (diff.find("\n@@") != std::string::npos || diff.rfind("@@", 0) == 0) {
    FUZZ_CHECK(!why.empty(), "a declined diff with a hunk says why");
  }
  return 0;
}
