// Source-changing actions (replace, edit, patch) applied to a kernel's current source. Expected
// failures — a search block that matches zero or several times, a diff that does not apply — are
// values naming the block or the hunk, which the episode turns into an observation with a penalty.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "env/protocol/messages.h"

namespace kernelgym {

struct EditOutcome {
  std::optional<std::string> source;  // the new source, when the action applied
  std::string error;                  // why not, otherwise
};

// Every block's `search` must occur exactly once in the source as it is when that block is
// applied (blocks apply in order, each to the result of the previous ones).
[[nodiscard]] EditOutcome ApplyEdits(const std::string& source, const std::vector<protocol::EditBlock>& edits);

// A unified diff against `source`, applied by GNU patch (a well-kept implementation with exact
// hunk matching; no fuzz, so a diff that does not fit is refused rather than guessed at). File
// names in the diff's headers are ignored: it always applies to this one source. The diff goes
// through RecountHunks first; when that declines, the diff is applied as written.
[[nodiscard]] EditOutcome ApplyPatch(const std::string& source, const std::string& diff);

// Models write hunk bodies well but their `@@ -a,b +c,d @@` numbers badly (wrong lines, wrong
// counts), and GNU patch refuses a hunk whose counts disagree with its body. The body alone is
// enough when a hunk's old text (its ' ' and '-' lines, in order) equals consecutive whole lines
// of `source` at exactly one place: this returns the diff with every such hunk's header rewritten
// from that place and its body, ready for `patch -F0`. A hunk with no old lines cannot be placed
// and keeps its header. Models drop the space of an empty context line, so an empty line inside a
// hunk is one (but blank lines ending a hunk are spacing). With no fuzz GNU patch pins a hunk with
// less trailing than leading context to the end of the file and calls one without changes
// malformed, so surplus leading context and change-less hunks are dropped once placed.
//
// Declines (nullopt) rather than guess: a hunk matching nowhere or in several places, hunks out
// of order or overlapping, no hunk that changes anything, a change line after text that is not
// part of a hunk (a context line that lost its leading space would otherwise cut its hunk short).
// `why` then names the hunk or the line; it is empty when the diff has no hunk at all. Pure: no
// files, no processes.
[[nodiscard]] std::optional<std::string> RecountHunks(const std::string& source, const std::string& diff,
                                                      std::string& why);

}  // namespace kernelgym
