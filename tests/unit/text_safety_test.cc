// Text a candidate controls (core/text_safety.h): ill-formed UTF-8 replaced by U+FFFD one
// per maximal subpart, valid text untouched, control characters shown as escapes, and every
// string of a result covered.
#include "core/text_safety.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "core/result_json.h"

namespace kernelgym {
namespace {

const std::string kR = "\xEF\xBF\xBD";  // U+FFFD

std::string Times(int n, const std::string& s) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(ValidUtf8, WellFormedTextIsUnchanged) {
  for (const std::string& text : {
           std::string(""),
           std::string("plain ASCII, tabs\tand\nnewlines"),
           std::string("h\xC3\xA9llo w\xC3\xB6rld"),
           std::string("\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x9A\x80"),  // 日本語 🚀
           std::string("a\0b", 3),                                                // NUL is a character
           // The edges of every row of Unicode's table 3-7.
           std::string(
               "\xC2\x80 \xDF\xBF \xE0\xA0\x80 \xE0\xBF\xBF \xE1\x80\x80 \xEC\xBF\xBF \xED\x80\x80 \xED\x9F\xBF"),
           std::string("\xEE\x80\x80 \xEF\xBF\xBF \xF0\x90\x80\x80 \xF0\xBF\xBF\xBF \xF1\x80\x80\x80 \xF3\xBF\xBF\xBF"),
           std::string("\xF4\x80\x80\x80 \xF4\x8F\xBF\xBF"),
       }) {
    EXPECT_TRUE(IsValidUtf8(text)) << text;
    EXPECT_EQ(ValidUtf8(text), text);
  }
}

struct Invalid {
  const char* what;
  std::string bytes;
  std::string replaced;
};

TEST(ValidUtf8, EachIllFormedClassIsReplacedOncePerMaximalSubpart) {
  const std::vector<Invalid> cases = {
      {"bytes that never occur",
       "a\xFF\xFE"
       "b",
       "a" + Times(2, kR) + "b"},
      {"F5..FF leads (past U+10FFFF)", "\xF5\x80\x80\x80", Times(4, kR)},
      {"a stray continuation byte", "x\x80y", "x" + kR + "y"},
      {"two stray continuation bytes", "\xBF\x80", Times(2, kR)},
      {"overlong NUL (C0 80)", "\xC0\x80", Times(2, kR)},
      {"overlong 2-byte lead C1", "\xC1\xBF", Times(2, kR)},
      {"overlong 3-byte form", "\xE0\x80\x80", Times(3, kR)},
      {"overlong 4-byte form", "\xF0\x80\x80\x80", Times(4, kR)},
      {"a lone high surrogate", "\xED\xA0\x80", Times(3, kR)},
      {"a lone low surrogate", "\xED\xBF\xBF", Times(3, kR)},
      {"a code point past U+10FFFF", "\xF4\x90\x80\x80", Times(4, kR)},
      {"a 3-byte sequence cut short at the end", "ok \xE2\x82", "ok " + kR},
      {"a 3-byte sequence cut short before ASCII", "\xE2\x82x", kR + "x"},
      {"a 4-byte sequence cut short", "\xF0\x9F\x9A", kR},
      {"a 2-byte lead at the end", "\xC3", kR},
      {"a lead followed by a lead", "\xC3\xC3\xA9", kR + "\xC3\xA9"},
      {"a 5-byte form", "\xF8\x88\x80\x80\x80", Times(5, kR)},
      {"a 6-byte form", "\xFC\x84\x80\x80\x80\x80", Times(6, kR)},
      {"valid text around bad bytes",
       "a\xFF"
       "b\xE2\x82\xAC"
       "c",
       "a" + kR +
           "b\xE2\x82\xAC"
           "c"},
  };
  for (const Invalid& c : cases) {
    EXPECT_FALSE(IsValidUtf8(c.bytes)) << c.what;
    EXPECT_EQ(ValidUtf8(c.bytes), c.replaced) << c.what;
    EXPECT_TRUE(IsValidUtf8(ValidUtf8(c.bytes))) << c.what;
  }
}

// nlohmann's serializer has a UTF-8 validator of its own (the one that threw type_error 316 and
// aborted `kernelgym eval --json`): on random bytes both must agree on what is valid, and our
// replacement must always be accepted by it.
TEST(ValidUtf8, AgreesWithNlohmannsValidatorOnRandomBytes) {
  std::mt19937 rng(20261201);
  // Bytes drawn mostly from the interesting ranges: ASCII, continuation bytes, every kind of lead.
  const std::vector<unsigned char> pool = {'a',  ' ',  0x00, 0x1B, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0,
                                           0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE,
                                           0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xF8, 0xFC, 0xFE, 0xFF};
  int invalid = 0;
  for (int n = 0; n < 20000; ++n) {
    std::string s(rng() % 8, '\0');
    for (char& c : s) c = static_cast<char>(pool[rng() % pool.size()]);
    bool nlohmann_accepts = true;
    try {
      (void)nlohmann::json(s).dump();
    } catch (const nlohmann::json::type_error&) {
      nlohmann_accepts = false;
    }
    ASSERT_EQ(IsValidUtf8(s), nlohmann_accepts)
        << nlohmann::json(s).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    invalid += !nlohmann_accepts;
    const std::string fixed = ValidUtf8(s);
    ASSERT_NO_THROW((void)nlohmann::json(fixed).dump());
    if (nlohmann_accepts) {
      ASSERT_EQ(fixed, s);
    }
  }
  EXPECT_GT(invalid, 1000) << "the sample must exercise the invalid paths";
}

TEST(Utf8Prefix, NeverCutsACharacter) {
  const std::string text =
      "a\xC3\xA9"
      "b\xF0\x9F\x9A\x80";  // a é b 🚀
  EXPECT_EQ(Utf8Prefix(text, 100), text);
  EXPECT_EQ(Utf8Prefix(text, 1), "a");
  EXPECT_EQ(Utf8Prefix(text, 2), "a");  // inside é
  EXPECT_EQ(Utf8Prefix(text, 3), "a\xC3\xA9");
  EXPECT_EQ(Utf8Prefix(text, 5),
            "a\xC3\xA9"
            "b");  // inside 🚀
  EXPECT_EQ(Utf8Prefix(text, 7),
            "a\xC3\xA9"
            "b");
  EXPECT_EQ(Utf8Prefix(text, 8), text);
  EXPECT_EQ(Utf8Prefix(text, 0), "");
}

TEST(PrintableText, ControlCharactersBecomeVisibleEscapes) {
  EXPECT_EQ(PrintableText("\x1B[1A\x1B[2Kstatus: ok"), "\\x1b[1A\\x1b[2Kstatus: ok");
  EXPECT_EQ(PrintableText("incorrect\rok"), "incorrect\\x0dok");
  EXPECT_EQ(PrintableText("crashed\b\b\bok"), "crashed\\x08\\x08\\x08ok");
  EXPECT_EQ(PrintableText("\x1B]0;title\x07"), "\\x1b]0;title\\x07");
  EXPECT_EQ(PrintableText(std::string("nul\0.", 5)), "nul\\x00.");
  EXPECT_EQ(PrintableText("del\x7F"), "del\\x7f");
  EXPECT_EQ(PrintableText("a\tb"), "a\tb") << "a tab moves nothing a reader relies on";
  EXPECT_EQ(PrintableText("one\ntwo"), "one\\x0atwo");
  EXPECT_EQ(PrintableText("one\ntwo", /*keep_newlines=*/true), "one\ntwo");
  EXPECT_EQ(PrintableText("one\r\ntwo", /*keep_newlines=*/true), "one\\x0d\ntwo");
  // C1 controls (NEL, CSI) and the characters that reorder or break lines invisibly.
  EXPECT_EQ(PrintableText("a\xC2\x85"
                          "b\xC2\x9B"
                          "2K"),
            "a\\u0085b\\u009b2K");
  EXPECT_EQ(PrintableText("ok \xE2\x80\xAE"
                          "kcah"),
            "ok \\u202ekcah");                                               // RIGHT-TO-LEFT OVERRIDE
  EXPECT_EQ(PrintableText("\xE2\x81\xA6x\xE2\x81\xA9"), "\\u2066x\\u2069");  // LRI ... PDI
  EXPECT_EQ(PrintableText("a\xE2\x80\xA8"
                          "b\xE2\x80\xA9"),
            "a\\u2028b\\u2029");
  EXPECT_EQ(PrintableText("\xE2\x80\x8F\xD8\x9C"), "\\u200f\\u061c");
}

TEST(PrintableText, OrdinaryTextIsUnchangedAndBadBytesAreReplaced) {
  const std::string text = "speedup 10.000x \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x9A\x80 \xC2\xA0\xC2\xA9 \xE2\x80\x94";
  EXPECT_EQ(PrintableText(text), text);
  EXPECT_EQ(PrintableText("\xFF\x1B"), kR + "\\x1b");
  for (unsigned c = 0; c < 0x20; ++c) {
    const std::string shown = PrintableText(std::string(1, static_cast<char>(c)));
    if (c == '\t') continue;
    EXPECT_EQ(shown.find(static_cast<char>(c)), std::string::npos) << "control " << c << " must not pass";
  }
}

// Every string field of a result, each set to bytes that are not UTF-8.
EvalResult ResultWithBadBytesEverywhere() {
  const std::string bad = "\xFF\xC0\x80\xED\xA0\x80";  // six bytes, six maximal subparts
  EvalResult r;
  r.task_id = "t" + bad;
  r.backend = "b" + bad;
  r.status = Status::kCompileError;
  r.message = "m" + bad;
  r.details = {"d" + bad};
  r.diagnostics = {{"f" + bad, 1, 2, "s" + bad, "msg" + bad}};
  CorrectnessReport c;
  OutputCheck check;
  check.output = "y" + bad;
  c.checks = {check};
  r.correctness = c;
  ProfileReport p;
  p.bound = "memory" + bad;
  p.counters = {{"counter" + bad, 1}};
  p.unavailable_counters = {"u" + bad};
  p.remarks = {{3, 4, false, "remark" + bad}};
  r.profile = p;
  r.timing_clock = "cpu" + bad;
  r.timing_note = "note" + bad;
  r.estimates = {{"e" + bad, 1.5}};
  r.protections = {{"p" + bad, true}};
  r.stage_seconds = {{"s" + bad, 0.5}};
  return r;
}

TEST(ResultText, EveryStringOfAResultIsCovered) {
  // One field at a time: ResultTextIsValid must see each, and MakeResultTextValid must fix each.
  const EvalResult all_bad = ResultWithBadBytesEverywhere();
  const std::vector<std::function<void(EvalResult&, const EvalResult&)>> one_field = {
      [](EvalResult& r, const EvalResult& b) { r.task_id = b.task_id; },
      [](EvalResult& r, const EvalResult& b) { r.backend = b.backend; },
      [](EvalResult& r, const EvalResult& b) { r.message = b.message; },
      [](EvalResult& r, const EvalResult& b) { r.details = b.details; },
      [](EvalResult& r, const EvalResult& b) { r.diagnostics[0].file = b.diagnostics[0].file; },
      [](EvalResult& r, const EvalResult& b) { r.diagnostics[0].severity = b.diagnostics[0].severity; },
      [](EvalResult& r, const EvalResult& b) { r.diagnostics[0].message = b.diagnostics[0].message; },
      [](EvalResult& r, const EvalResult& b) { r.correctness->checks[0].output = b.correctness->checks[0].output; },
      [](EvalResult& r, const EvalResult& b) { r.profile->bound = b.profile->bound; },
      [](EvalResult& r, const EvalResult& b) { r.profile->counters = b.profile->counters; },
      [](EvalResult& r, const EvalResult& b) { r.profile->unavailable_counters = b.profile->unavailable_counters; },
      [](EvalResult& r, const EvalResult& b) { r.profile->remarks = b.profile->remarks; },
      [](EvalResult& r, const EvalResult& b) { r.timing_clock = b.timing_clock; },
      [](EvalResult& r, const EvalResult& b) { r.timing_note = b.timing_note; },
      [](EvalResult& r, const EvalResult& b) { r.estimates = b.estimates; },
      [](EvalResult& r, const EvalResult& b) { r.protections = b.protections; },
      [](EvalResult& r, const EvalResult& b) { r.stage_seconds = b.stage_seconds; },
  };
  EvalResult clean = all_bad;
  MakeResultTextValid(clean);
  ASSERT_TRUE(ResultTextIsValid(clean));
  EXPECT_FALSE(ResultTextIsValid(all_bad));
  for (std::size_t i = 0; i < one_field.size(); ++i) {
    EvalResult r = clean;
    one_field[i](r, all_bad);
    EXPECT_FALSE(ResultTextIsValid(r)) << "field " << i << " is not checked";
    MakeResultTextValid(r);
    EXPECT_TRUE(ResultTextIsValid(r)) << "field " << i << " is not made valid";
  }
  EXPECT_EQ(clean.message, "m" + Times(6, kR));
  EXPECT_EQ(clean.protections.begin()->first, "p" + Times(6, kR));
}

TEST(ResultText, ResultToJsonOfBadBytesDumpsAndReadsBack) {
  const EvalResult bad = ResultWithBadBytesEverywhere();
  const nlohmann::json j = ResultToJson(bad, /*include_samples=*/true);
  std::string text;
  ASSERT_NO_THROW(text = j.dump()) << "a result's JSON must never make dump() throw";
  const nlohmann::json parsed = nlohmann::json::parse(text);  // strict: throws on invalid UTF-8
  std::string problem;
  const std::optional<EvalResult> back = ResultFromJson(parsed, problem);
  ASSERT_TRUE(back) << problem;
  EXPECT_TRUE(ResultTextIsValid(*back));
  EXPECT_EQ(back->diagnostics[0].message, "msg" + Times(6, kR));
  EXPECT_EQ(back->details[0], "d" + Times(6, kR));
}

}  // namespace
}  // namespace kernelgym
