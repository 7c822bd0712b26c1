#include "tpu_runner/diagnostics.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "core/text_safety.h"

namespace kernelgym {
namespace {

// g++ copies the bytes of the source into its JSON diagnostics as they are: an #error line or a
// #line file name may put ill-formed UTF-8 or raw control characters (ESC; it escapes only \n,
// \r, \t, \b, \f) inside a JSON string, and nlohmann's parser refuses both, which lost the
// diagnostics. `line` is already valid UTF-8; raw control bytes become \u00XX escapes (JSON
// allows them nowhere else: the only control characters outside strings are whitespace, which
// g++ does not put inside one line).
std::string EscapeRawControls(const std::string& line) {
  std::string out;
  out.reserve(line.size());
  for (const char c : line) {
    if (static_cast<unsigned char>(c) >= 0x20) {
      out += c;
      continue;
    }
    static constexpr char kHex[] = "0123456789abcdef";
    out += "\\u00";
    out += kHex[(c >> 4) & 0xF];
    out += kHex[c & 0xF];
  }
  return out;
}

void AppendDiagnostics(const nlohmann::json& entries, std::vector<Diagnostic>& out) {
  for (const auto& entry : entries) {
    if (!entry.is_object()) continue;
    Diagnostic d;
    d.severity = entry.value("kind", std::string("error"));
    d.message = entry.value("message", std::string());
    if (entry.contains("locations") && entry["locations"].is_array() && !entry["locations"].empty()) {
      const auto& caret = entry["locations"][0].value("caret", nlohmann::json::object());
      d.file = caret.value("file", std::string());
      d.line = caret.value("line", 0);
      d.column = caret.value("column", 0);
    }
    out.push_back(std::move(d));
    if (entry.contains("children")) AppendDiagnostics(entry["children"], out);
  }
}

}  // namespace

CompilerOutput ParseCompilerStderr(const std::string& stderr_text) {
  CompilerOutput out;
  std::istringstream in(stderr_text);
  std::string raw;
  bool in_guard_list = false;
  while (std::getline(in, raw)) {
    // Everything taken from here (diagnostics, include paths, other lines) is valid UTF-8.
    const std::string line = ValidUtf8(raw);
    if (line.empty()) continue;
    if (line.rfind("! ", 0) == 0) continue;  // the precompiled header that was loaded
    if (line.rfind(". ", 0) == 0) {  // depth-1 include: included by the main file
      out.direct_includes.push_back(line.substr(2));
      continue;
    }
    if (line[0] == '.' && line.find_first_not_of('.') != std::string::npos &&
        line[line.find_first_not_of('.')] == ' ')
      continue;  // deeper includes
    if (line.rfind("Multiple include guards may be useful for:", 0) == 0) {
      in_guard_list = true;
      continue;
    }
    if (line[0] == '[') {
      in_guard_list = false;
      try {
        AppendDiagnostics(nlohmann::json::parse(EscapeRawControls(line)), out.diagnostics);
        continue;
      } catch (const nlohmann::json::exception&) {
      }
    }
    // Guard-list entries are bare paths ("/usr/include/...", "./prelude.h"); anything with a
    // colon or a space (a linker error) ends the list.
    if (in_guard_list && line.find(':') == std::string::npos && line.find(' ') == std::string::npos) continue;
    in_guard_list = false;
    out.unparsed.push_back(line);
  }
  return out;
}

std::vector<Remark> ParseVectorizationRemarks(const std::string& remarks_text, const std::string& source_name) {
  // Lines look like "kernel.cpp:12:21: optimized: loop vectorized using 64 byte vectors" or
  // "kernel.cpp:7:5: missed: couldn't vectorize loop".
  std::vector<Remark> out;
  const std::string valid = ValidUtf8(remarks_text);
  std::istringstream in(valid);
  std::string line;
  const std::string prefix = source_name + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream fields(line.substr(prefix.size()));
    Remark r;
    char colon;
    if (!(fields >> r.line >> colon >> r.column >> colon)) continue;
    std::string rest;
    std::getline(fields, rest);
    rest.erase(0, rest.find_first_not_of(' '));
    if (rest.rfind("optimized:", 0) == 0) {
      r.vectorized = true;
      r.message = rest.substr(10);
    } else if (rest.rfind("missed:", 0) == 0) {
      r.message = rest.substr(7);
    } else {
      continue;
    }
    r.message.erase(0, r.message.find_first_not_of(' '));
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const Remark& a, const Remark& b) {
    return std::tie(a.line, a.vectorized, a.message, a.column) < std::tie(b.line, b.vectorized, b.message, b.column);
  });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const Remark& a, const Remark& b) {
                          return a.line == b.line && a.vectorized == b.vectorized && a.message == b.message;
                        }),
            out.end());
  return out;
}

}  // namespace kernelgym
