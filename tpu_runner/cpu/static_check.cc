#include "tpu_runner/cpu/static_check.h"

#include <algorithm>
#include <cctype>
#include <string_view>

namespace kernelgym {
namespace {

// What the preprocessor sees, the way translation phases 1-3 produce it: a leading UTF-8 BOM
// dropped, backslash(+blanks)+newline spliced, comments replaced by a space, string/char/raw
// string literals kept whole (so a "/*" or "#" inside one means nothing), digit separators (1'000)
// not taken for character literals. Each logical line remembers the source line of its first
// token, which is where a directive's diagnostic points.
struct LogicalLine {
  int source_line = 0;
  std::string text;
};

struct SourceChar {
  char c;
  int line;
};

std::vector<SourceChar> Splice(const std::string& source) {
  std::vector<SourceChar> out;
  out.reserve(source.size());
  std::size_t i = source.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;
  int line = 1;
  while (i < source.size()) {
    if (source[i] == '\\') {
      std::size_t j = i + 1;
      while (j < source.size() && (source[j] == ' ' || source[j] == '\t' || source[j] == '\r')) ++j;
      if (j < source.size() && source[j] == '\n') {
        ++line;
        i = j + 1;
        continue;
      }
    }
    out.push_back({source[i], line});
    if (source[i] == '\n') ++line;
    ++i;
  }
  return out;
}

bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::vector<LogicalLine> LogicalLines(const std::string& source) {
  const std::vector<SourceChar> in = Splice(source);
  std::vector<LogicalLine> lines;
  LogicalLine current;
  std::string token;  // the identifier or pp-number being read (for raw strings, digit separators)
  auto emit = [&](char c, int line) {
    if (current.source_line == 0 && !std::isspace(static_cast<unsigned char>(c))) current.source_line = line;
    current.text += c;
  };
  auto end_line = [&](int line) {
    if (current.source_line == 0) current.source_line = line;
    lines.push_back(std::move(current));
    current = {};
  };
  std::size_t i = 0;
  const std::size_t n = in.size();
  auto at = [&](std::size_t k) { return k < n ? in[k].c : '\0'; };
  while (i < n) {
    const char c = in[i].c;
    const int line = in[i].line;
    if (c == '\n') {
      end_line(line);
      token.clear();
      ++i;
      continue;
    }
    if (c == '/' && at(i + 1) == '/') {  // to the end of the (spliced) line
      while (i < n && in[i].c != '\n') ++i;
      emit(' ', line);
      token.clear();
      continue;
    }
    if (c == '/' && at(i + 1) == '*') {  // may span lines: the logical line continues
      i += 2;
      while (i < n && !(in[i].c == '*' && at(i + 1) == '/')) ++i;
      i = std::min(n, i + 2);
      emit(' ', line);
      token.clear();
      continue;
    }
    if (c == '"' && (token == "R" || token == "u8R" || token == "uR" || token == "UR" || token == "LR")) {
      // Raw string: R"delim( ... )delim", newlines and all.
      std::size_t j = i + 1;
      std::string delim;
      while (j < n && in[j].c != '(' && delim.size() <= 16) delim += in[j++].c;
      const std::string close = ")" + delim + "\"";
      std::size_t k = j + 1;
      while (k < n) {
        bool match = true;
        for (std::size_t m = 0; m < close.size() && match; ++m) match = at(k + m) == close[m];
        if (match) break;
        ++k;
      }
      emit('"', line);
      emit('"', line);
      i = std::min(n, k + close.size());
      token.clear();
      continue;
    }
    const bool pp_number = !token.empty() && std::isdigit(static_cast<unsigned char>(token[0]));
    if (c == '\'' && pp_number && IsIdentChar(at(i + 1))) {  // digit separator
      token += c;
      emit(c, line);
      ++i;
      continue;
    }
    if (c == '"' || c == '\'') {  // ordinary literal: ends at its closing quote or the line's end
      emit(c, line);
      std::size_t j = i + 1;
      while (j < n && in[j].c != c && in[j].c != '\n') {
        if (in[j].c == '\\' && j + 1 < n && in[j + 1].c != '\n') emit(in[j++].c, line);
        emit(in[j++].c, line);
      }
      if (j < n && in[j].c == c) {
        emit(c, line);
        ++j;
      }
      i = j;
      token.clear();
      continue;
    }
    if (IsIdentChar(c) || (c == '.' && pp_number)) token += c;
    else token.clear();
    emit(c, line);
    ++i;
  }
  end_line(in.empty() ? 1 : in.back().line);
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

std::string AssemblerFileDirective(const std::string& assembly) {
  static constexpr std::string_view kDirectives[] = {"incbin", "include", "macro", "irpc", "irp"};
  const auto symbol_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '.'; };
  for (std::size_t dot = assembly.find('.'); dot != std::string::npos; dot = assembly.find('.', dot + 1)) {
    if (dot > 0 && symbol_char(assembly[dot - 1])) continue;
    for (std::string_view name : kDirectives) {
      if (dot + 1 + name.size() > assembly.size()) continue;
      bool same = true;
      for (std::size_t i = 0; i < name.size() && same; ++i)
        same = std::tolower(static_cast<unsigned char>(assembly[dot + 1 + i])) == name[i];
      const std::size_t after = dot + 1 + name.size();
      if (same && (after == assembly.size() || !symbol_char(assembly[after]))) return "." + std::string(name);
    }
  }
  return "";
}

}  // namespace kernelgym
