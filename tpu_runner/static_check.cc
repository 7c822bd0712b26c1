#include "tpu_runner/static_check.h"

#include <algorithm>
#include <cctype>

namespace kernelgym {
namespace {

// Removes comments and joins backslash-continued lines, keeping a map back to source lines so
// diagnostics point at what the author wrote.
struct LogicalLine {
  int source_line = 0;
  std::string text;
};

std::vector<LogicalLine> LogicalLines(const std::string& source) {
  std::vector<LogicalLine> lines;
  LogicalLine current{1, ""};
  int line = 1;
  bool in_block_comment = false;
  char in_literal = 0;
  for (std::size_t i = 0; i < source.size(); ++i) {
    const char c = source[i];
    const char next = i + 1 < source.size() ? source[i + 1] : '\0';
    if (c == '\\' && next == '\n') {  // continuation: same logical line
      ++line;
      ++i;
      continue;
    }
    if (c == '\n') {
      if (!in_block_comment) {
        lines.push_back(current);
        current = {line + 1, ""};
      }
      ++line;
      in_literal = 0;
      continue;
    }
    if (in_block_comment) {
      if (c == '*' && next == '/') {
        in_block_comment = false;
        current.text += ' ';
        ++i;
      }
      continue;
    }
    if (in_literal) {
      current.text += c;
      if (c == '\\' && next != '\0') current.text += source[++i];
      else if (c == in_literal) in_literal = 0;
      continue;
    }
    if (c == '/' && next == '*') {
      in_block_comment = true;
      ++i;
      continue;
    }
    if (c == '/' && next == '/') {
      while (i + 1 < source.size() && source[i + 1] != '\n') {
        if (source[i + 1] == '\\' && i + 2 < source.size() && source[i + 2] == '\n') break;
        ++i;
      }
      continue;
    }
    if (c == '"' || c == '\'') in_literal = c;
    current.text += c;
  }
  lines.push_back(current);
  return lines;
}

std::string Trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

const std::vector<std::string>& DefaultAllowedHeaders() {
  static const std::vector<std::string> kHeaders{
      "cmath",  "cstdint",  "cstddef",  "cstring", "cstdlib",  "algorithm", "limits",   "array",
      "vector", "numeric",  "utility",  "type_traits", "cfloat", "climits", "math.h",  "stdint.h",
      "stddef.h", "string.h", "stdlib.h", "float.h", "limits.h", "immintrin.h", "omp.h", "cassert",
      "assert.h", "bit", "functional", "memory", "tuple", "initializer_list", "new", "span"};
  return kHeaders;
}

bool IsAllowedHeader(const std::string& header, const KernelPolicy& policy) {
  const auto& base = DefaultAllowedHeaders();
  return std::find(base.begin(), base.end(), header) != base.end() ||
         std::find(policy.extra_allowed_headers.begin(), policy.extra_allowed_headers.end(), header) !=
             policy.extra_allowed_headers.end();
}

StaticCheckResult CheckSource(const std::string& source, const KernelPolicy& policy) {
  StaticCheckResult result;
  auto problem = [&](int line, std::string message) {
    if (result.ok) result.message = "line " + std::to_string(line) + ": " + message;
    result.ok = false;
    result.diagnostics.push_back({"kernel.cpp", line, 1, "error", std::move(message)});
  };
  if (source.size() > kMaxSourceBytes) {
    problem(1, "source is " + std::to_string(source.size()) + " bytes; the limit is " +
                   std::to_string(kMaxSourceBytes));
    return result;
  }
  if (source.find('\0') != std::string::npos) problem(1, "source contains a NUL byte");

  for (const LogicalLine& line : LogicalLines(source)) {
    std::string text = Trim(line.text);
    // '%:' is the digraph for '#'; '??=' the trigraph (off in C++17+, rejected anyway).
    std::size_t directive_start;
    if (text.rfind("#", 0) == 0) directive_start = 1;
    else if (text.rfind("%:", 0) == 0) directive_start = 2;
    else if (text.rfind("?\?=", 0) == 0) directive_start = 3;
    else continue;
    std::string rest = Trim(text.substr(directive_start));
    std::string directive;
    std::size_t i = 0;
    while (i < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[i])) || rest[i] == '_')) directive += rest[i++];
    if (directive == "include" || directive == "include_next" || directive == "import" || directive == "embed") {
      std::string target = Trim(rest.substr(i));
      if (directive != "include") {
        problem(line.source_line, "#" + directive + " is not allowed; use #include <header> from the allowed list");
        continue;
      }
      if (target.size() < 2 || !((target.front() == '<' && target.find('>') != std::string::npos) ||
                                 (target.front() == '"' && target.find('"', 1) != std::string::npos))) {
        problem(line.source_line, "include of a computed name (" + target +
                                      ") is not allowed; write the header literally as <name>");
        continue;
      }
      const char close = target.front() == '<' ? '>' : '"';
      const std::string header = target.substr(1, target.find(close, 1) - 1);
      if (header.empty() || header.front() == '/' || header.find("..") != std::string::npos) {
        problem(line.source_line, "include of path '" + header + "' is not allowed (absolute or parent path)");
      } else if (!IsAllowedHeader(header, policy)) {
        problem(line.source_line, "include of <" + header + "> is not allowed for this task; allowed: " +
                                      [&] {
                                        std::string all;
                                        for (const auto& h : DefaultAllowedHeaders()) all += (all.empty() ? "" : " ") + h;
                                        for (const auto& h : policy.extra_allowed_headers) all += " " + h;
                                        return all;
                                      }());
      }
    }
  }
  return result;
}

}  // namespace kernelgym
