// Text a candidate controls, made safe to carry and to show.
//
// A candidate's process writes whatever bytes it likes to stdout and stderr, and its source puts
// arbitrary bytes into the compiler's diagnostics (#error, #warning, #line, header and symbol
// names). All of that becomes strings of an EvalResult, and every consumer of a result needs valid
// UTF-8: nlohmann's dump() throws on anything else (`kernelgym eval --json` aborted), msgpack's
// str type is UTF-8 and the Python client decodes it strictly, the trajectory store is JSON.
//
// Ill-formed sequences are *replaced* (U+FFFD), not escaped: valid text (any script, emoji)
// passes through byte for byte, the result stays plain text every consumer reads the same way,
// and there is no escape syntax for a candidate to imitate or for a consumer to undo. The lost
// bytes were never meaningful text. Control characters are left in the data (JSON and msgpack
// carry them safely) and neutralised where text is shown: PrintableText.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/result.h"

namespace kernelgym {

// True when `text` is well-formed UTF-8 (Unicode 15, table 3-7: no overlong forms, no surrogates,
// nothing past U+10FFFF, no stray or missing continuation bytes).
bool IsValidUtf8(std::string_view text);

// `text` with every ill-formed sequence replaced by U+FFFD, one per maximal subpart (Unicode's
// recommended practice, chapter 3.9: "\xe2\x82" cut short is one U+FFFD, the surrogate
// "\xed\xa0\x80" is three). Well-formed text comes back unchanged.
std::string ValidUtf8(std::string_view text);

// The longest prefix of `text` of at most `max_bytes` bytes that does not end inside a multi-byte
// sequence (for cutting valid UTF-8 to a length without making it invalid).
std::string_view Utf8Prefix(std::string_view text, std::size_t max_bytes);

// `text` (made valid UTF-8) for a person's terminal or a model's prompt: every character that
// moves the cursor, erases, starts an escape sequence, breaks a line or reorders text is shown as
// a visible escape instead: C0 controls as "\x1b", "\x0d", ... (tab kept; newline kept only with
// `keep_newlines`), DEL as "\x7f", C1 controls and the invisible layout characters (bidi
// embeddings, overrides and isolates, LRM/RLM/ALM, the line and paragraph separators) as
// "\u202e". Nothing of the candidate's can then overwrite, erase or re-order a line it did not
// write, or start a new one.
std::string PrintableText(std::string_view text, bool keep_newlines = false);

// Every string in `result` (messages, details, diagnostics, remarks, names, map keys) made valid
// UTF-8 with ValidUtf8. Backends' results pass through this (BackendRegistry::Create), and so do
// results read from the wire (runner protocol) and written as JSON (ResultToJson).
void MakeResultTextValid(EvalResult& result);
// True when every string in `result` is valid UTF-8 (what MakeResultTextValid ensures).
bool ResultTextIsValid(const EvalResult& result);

}  // namespace kernelgym
