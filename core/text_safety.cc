#include "core/text_safety.h"

#include <cstdint>
#include <cstdio>
#include <map>

namespace kernelgym {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// One step of decoding: the code point at the start of `text` and its length in bytes, or
// (-1, n) for an ill-formed maximal subpart of n bytes (n >= 1). `text` is not empty.
struct Step {
  int32_t code_point;
  std::size_t length;
};

Step DecodeOne(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return {lead, 1};
  // Table 3-7 of the Unicode standard: the lead byte fixes the length and the range of the second
  // byte (which is what excludes overlong forms, surrogates and code points past U+10FFFF).
  std::size_t length;
  unsigned char second_low = 0x80, second_high = 0xBF;
  int32_t value;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    value = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    value = lead & 0x0F;
    if (lead == 0xE0) second_low = 0xA0;
    if (lead == 0xED) second_high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    value = lead & 0x07;
    if (lead == 0xF0) second_low = 0x90;
    if (lead == 0xF4) second_high = 0x8F;
  } else {
    return {-1, 1};  // a continuation byte, C0/C1 (overlong), or F5..FF (past U+10FFFF)
  }
  for (std::size_t i = 1; i < length; ++i) {
    const unsigned char low = i == 1 ? second_low : 0x80, high = i == 1 ? second_high : 0xBF;
    if (i >= text.size() || byte(i) < low || byte(i) > high) return {-1, i};  // the maximal subpart
    value = (value << 6) | (byte(i) & 0x3F);
  }
  return {value, length};
}

// Characters that change how the text around them is laid out without being visible: C1
// controls, the Arabic letter mark, LRM/RLM, the line and paragraph separators, and the bidi
// embeddings, overrides and isolates.
bool IsInvisibleLayoutControl(int32_t c) {
  return (c >= 0x80 && c <= 0x9F) || c == 0x061C || c == 0x200E || c == 0x200F || (c >= 0x2028 && c <= 0x202E) ||
         (c >= 0x2066 && c <= 0x2069);
}

// Calls `on_string(s)` for every string of the result, and `on_keys(map)` for every map keyed
// by strings. `R` is EvalResult or const EvalResult.
template <typename R, typename OnString, typename OnKeys>
void ForEachText(R& r, OnString on_string, OnKeys on_keys) {
  on_string(r.task_id);
  on_string(r.backend);
  on_string(r.message);
  for (auto& d : r.details) on_string(d);
  for (auto& d : r.diagnostics) {
    on_string(d.file);
    on_string(d.severity);
    on_string(d.message);
  }
  if (r.correctness)
    for (auto& c : r.correctness->checks) on_string(c.output);
  if (r.profile) {
    on_string(r.profile->bound);
    on_keys(r.profile->counters);
    for (auto& u : r.profile->unavailable_counters) on_string(u);
    for (auto& m : r.profile->remarks) on_string(m.message);
  }
  on_string(r.timing_clock);
  on_string(r.timing_note);
  if (r.estimate) {
    on_string(r.estimate->method);
    for (auto& reason : r.estimate->reasons) on_string(reason);
  }
  for (auto& k : r.tpu_profile) {
    on_string(k.kernel);
    on_keys(k.unit_share);
  }
  on_keys(r.estimates);
  on_keys(r.protections);
  on_keys(r.stage_seconds);
}

template <typename Value>
void MakeKeysValid(std::map<std::string, Value>& map) {
  bool all_valid = true;
  for (const auto& [key, value] : map) all_valid = all_valid && IsValidUtf8(key);
  if (all_valid) return;
  std::map<std::string, Value> rebuilt;
  // Two keys that differ only in invalid bytes may become one; the first (in byte order) stays.
  for (auto& [key, value] : map) rebuilt.emplace(ValidUtf8(key), std::move(value));
  map = std::move(rebuilt);
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    // ASCII runs are the common case: skip them a byte at a time without decoding.
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const Step step = DecodeOne(text.substr(i));
    if (step.code_point < 0) return false;
    i += step.length;
  }
  return true;
}

std::string ValidUtf8(std::string_view text) {
  if (IsValidUtf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 16);
  std::size_t i = 0;
  while (i < text.size()) {
    const Step step = DecodeOne(text.substr(i));
    if (step.code_point < 0)
      out += kReplacement;
    else
      out.append(text.substr(i, step.length));
    i += step.length;
  }
  return out;
}

std::string_view Utf8Prefix(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t end = max_bytes;
  // Back up over continuation bytes to the start of the sequence the cut falls in.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

std::string PrintableText(std::string_view raw, bool keep_newlines) {
  const std::string text = ValidUtf8(raw);
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  char escape[16];
  while (i < text.size()) {
    const Step step = DecodeOne(std::string_view(text).substr(i));  // valid: never -1
    const int32_t c = step.code_point;
    if ((c < 0x20 && c != '\t' && !(c == '\n' && keep_newlines)) || c == 0x7F) {
      std::snprintf(escape, sizeof(escape), "\\x%02x", static_cast<unsigned>(c));
      out += escape;
    } else if (IsInvisibleLayoutControl(c)) {
      std::snprintf(escape, sizeof(escape), "\\u%04x", static_cast<unsigned>(c));
      out += escape;
    } else {
      out.append(text, i, step.length);
    }
    i += step.length;
  }
  return out;
}

void MakeResultTextValid(EvalResult& result) {
  ForEachText(
      result,
      [](std::string& s) {
        if (!IsValidUtf8(s)) s = ValidUtf8(s);
      },
      [](auto& map) { MakeKeysValid(map); });
}

bool ResultTextIsValid(const EvalResult& result) {
  bool valid = true;
  ForEachText(
      result, [&](const std::string& s) { valid = valid && IsValidUtf8(s); },
      [&](const auto& map) {
        for (const auto& [key, value] : map) valid = valid && IsValidUtf8(key);
      });
  return valid;
}

}  // namespace kernelgym
