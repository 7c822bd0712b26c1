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
// names in the diff's headers are ignored: it always applies to this one source.
[[nodiscard]] EditOutcome ApplyPatch(const std::string& source, const std::string& diff);

}  // namespace kernelgym
