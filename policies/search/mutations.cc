#include "policies/search/mutations.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

namespace kernelgym::search {
namespace {

// ---------------------------------------------------------------------------------------------
// Lexing. The operators work on tokens of a copy of the source in which comments and the insides
// of string and character literals are blanked (same length, newlines kept), so a `for (` or an
// `exp(` in a comment or a string is never a site, and every token offset is an offset into the
// original source. Preprocessor lines produce no tokens; pragmas and includes are found by line.

struct Token {
  enum Kind { kIdent, kNumber, kString, kChar, kPunct };
  Kind kind;
  std::string text;                // as written (a literal keeps its quotes and contents)
  std::size_t begin = 0, end = 0;  // [begin, end) in the source
};

bool IsIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool IsBlank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

// Words that end the type part of a declaration when walking backwards, and never name a variable.
const std::set<std::string, std::less<>> kKeywords = {
    "return",    "else",     "case",     "goto",      "throw",     "new",      "delete",   "sizeof", "alignof",
    "co_return", "co_yield", "co_await", "do",        "typedef",   "using",    "operator", "if",     "while",
    "for",       "switch",   "catch",    "true",      "false",     "nullptr",  "this",     "break",  "continue",
    "default",   "public",   "private",  "protected", "namespace", "template", "typename", "extern"};

// Identifiers that may spell an arithmetic scalar type (with qualifiers).
const std::set<std::string, std::less<>> kArithmeticWords = {
    "float",    "double",    "int",      "long",    "short",     "unsigned", "signed",  "char",     "bool",
    "size_t",   "ptrdiff_t", "int8_t",   "int16_t", "int32_t",   "int64_t",  "uint8_t", "uint16_t", "uint32_t",
    "uint64_t", "const",     "volatile", "static",  "constexpr", "register", "std"};
const std::set<std::string, std::less<>> kQualifierWords = {"const",     "volatile", "static",
                                                            "constexpr", "register", "std"};

class Lexed {
 public:
  explicit Lexed(const std::string& source) : src(source), code(source) {
    Lex();
    MatchBrackets();
    line_starts.push_back(0);
    for (std::size_t i = 0; i < src.size(); ++i)
      if (src[i] == '\n') line_starts.push_back(i + 1);
  }

  const std::string& src;
  std::string code;         // src with comments and literal contents blanked
  std::vector<Token> toks;  // no tokens from preprocessor lines
  std::vector<int> match;   // index of the matching bracket, -1 for none and for other tokens
  std::vector<int> parent;  // innermost enclosing opener, -1 at file level
  bool balanced = true;     // every ( [ { closed by its own kind
  std::vector<std::size_t> line_starts;

  int n() const { return static_cast<int>(toks.size()); }
  const std::string& T(int i) const {
    static const std::string kNone;
    return i >= 0 && i < n() ? toks[static_cast<std::size_t>(i)].text : kNone;
  }
  bool IsIdent(int i) const { return i >= 0 && i < n() && toks[static_cast<std::size_t>(i)].kind == Token::kIdent; }
  int Match(int i) const { return i >= 0 && i < n() ? match[static_cast<std::size_t>(i)] : -1; }
  int Parent(int i) const { return i >= 0 && i < n() ? parent[static_cast<std::size_t>(i)] : -1; }

  int LineOf(std::size_t offset) const {
    return static_cast<int>(std::upper_bound(line_starts.begin(), line_starts.end(), offset) - line_starts.begin());
  }
  std::size_t LineStart(std::size_t offset) const { return line_starts[static_cast<std::size_t>(LineOf(offset) - 1)]; }
  // The blanked text of the 1-based line, without its newline.
  std::string_view CodeLine(int line) const {
    const std::size_t b = line_starts[static_cast<std::size_t>(line - 1)];
    std::size_t e = static_cast<std::size_t>(line) < line_starts.size()
                        ? line_starts[static_cast<std::size_t>(line)] - 1
                        : code.size();
    return std::string_view(code).substr(b, e - b);
  }

 private:
  void Blank(std::size_t from, std::size_t to) {
    for (std::size_t k = from; k < to && k < code.size(); ++k)
      if (code[k] != '\n') code[k] = ' ';
  }

  // Skips a comment starting at i (src[i] == '/'), blanking it; returns the offset after it.
  std::size_t SkipComment(std::size_t i) {
    std::size_t e;
    if (src[i + 1] == '/') {
      e = src.find('\n', i);
      if (e == std::string::npos) e = src.size();
    } else {
      e = src.find("*/", i + 2);
      e = e == std::string::npos ? src.size() : e + 2;
    }
    Blank(i, e);
    return e;
  }

  // A literal whose opening quote is at q (its prefix, if any, starts earlier); blanks its contents
  // and returns the offset after the closing quote.
  std::size_t SkipLiteral(std::size_t q, bool raw) {
    const char quote = src[q];
    std::size_t e;
    bool closed = false;
    if (raw) {
      const std::size_t open = src.find('(', q + 1);
      if (open == std::string::npos) return src.size();
      const std::string close = ")" + src.substr(q + 1, open - q - 1) + "\"";
      e = src.find(close, open + 1);
      closed = e != std::string::npos;
      e = closed ? e + close.size() : src.size();
    } else {
      e = q + 1;
      while (e < src.size() && src[e] != quote && src[e] != '\n') e += src[e] == '\\' ? 2 : 1;
      e = std::min(e, src.size());
      closed = e < src.size() && src[e] == quote;
      if (closed) ++e;  // an unterminated literal ends at its line's end
    }
    Blank(q + 1, closed ? e - 1 : e);
    return e;
  }

  std::size_t SkipDirective(std::size_t i) {
    while (i < src.size() && src[i] != '\n') {
      if (src[i] == '\\' && i + 1 < src.size() && (src[i + 1] == '\n' || src[i + 1] == '\r')) {
        i = src.find('\n', i + 1);
        if (i == std::string::npos) return src.size();
        ++i;
      } else if (src[i] == '/' && i + 1 < src.size() && (src[i + 1] == '/' || src[i + 1] == '*')) {
        i = SkipComment(i);
      } else if (src[i] == '"' || src[i] == '\'') {
        i = SkipLiteral(i, false);
      } else {
        ++i;
      }
    }
    return i;
  }

  void Push(Token::Kind kind, std::size_t b, std::size_t e) { toks.push_back({kind, src.substr(b, e - b), b, e}); }

  void Lex() {
    static const char* const kPuncts[] = {"<=>", "<<=", ">>=", "...", "->*", "::", "->", "++", "--",
                                          "+=",  "-=",  "*=",  "/=",  "%=",  "&=", "|=", "^=", "==",
                                          "!=",  "<=",  ">=",  "&&",  "||",  "<<", ">>", ".*"};
    const std::size_t size = src.size();
    bool line_start = true;  // only blanks (or comments) since the last newline
    std::size_t i = 0;
    while (i < size) {
      const char c = src[i];
      const char next = i + 1 < size ? src[i + 1] : '\0';
      if (c == '\n') {
        line_start = true;
        ++i;
      } else if (IsBlank(c)) {
        ++i;
      } else if (c == '/' && (next == '/' || next == '*')) {
        i = SkipComment(i);
      } else if (c == '#' && line_start) {
        i = SkipDirective(i);
      } else if (IsIdentStart(c)) {
        line_start = false;
        std::size_t j = i;
        while (j < size && IsIdentChar(src[j])) ++j;
        const std::string word = src.substr(i, j - i);
        if (j < size && src[j] == '"' &&
            (word == "L" || word == "u" || word == "U" || word == "u8" || word == "R" || word == "LR" || word == "uR" ||
             word == "UR" || word == "u8R")) {
          const std::size_t e = SkipLiteral(j, word.back() == 'R');
          Push(Token::kString, i, e);
          i = e;
        } else if (j < size && src[j] == '\'' && (word == "L" || word == "u" || word == "U" || word == "u8")) {
          const std::size_t e = SkipLiteral(j, false);
          Push(Token::kChar, i, e);
          i = e;
        } else {
          Push(Token::kIdent, i, j);
          i = j;
        }
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '.' && std::isdigit(static_cast<unsigned char>(next)))) {
        line_start = false;
        std::size_t j = i + 1;  // a pp-number: digits, letters, '.', digit separators, exponent signs
        while (j < size) {
          const char d = src[j];
          if (IsIdentChar(d) || d == '.') {
            ++j;
          } else if (d == '\'' && j + 1 < size && IsIdentChar(src[j + 1])) {
            ++j;
          } else if ((d == '+' || d == '-') && std::string_view("eEpP").find(src[j - 1]) != std::string_view::npos) {
            ++j;
          } else {
            break;
          }
        }
        Push(Token::kNumber, i, j);
        i = j;
      } else if (c == '"' || c == '\'') {
        line_start = false;
        const std::size_t e = SkipLiteral(i, false);
        Push(c == '"' ? Token::kString : Token::kChar, i, e);
        i = e;
      } else {
        line_start = false;
        std::size_t len = 1;
        for (const char* p : kPuncts)
          if (src.compare(i, std::char_traits<char>::length(p), p) == 0) {
            len = std::char_traits<char>::length(p);
            break;
          }
        Push(Token::kPunct, i, i + len);
        i += len;
      }
    }
  }

  void MatchBrackets() {
    match.assign(toks.size(), -1);
    parent.assign(toks.size(), -1);
    std::vector<int> stack;
    for (int i = 0; i < n(); ++i) {
      const std::string& t = T(i);
      parent[static_cast<std::size_t>(i)] = stack.empty() ? -1 : stack.back();
      if (t == "(" || t == "[" || t == "{") {
        stack.push_back(i);
      } else if (t == ")" || t == "]" || t == "}") {
        const char open = t == ")" ? '(' : t == "]" ? '[' : '{';
        if (stack.empty() || T(stack.back())[0] != open) {
          balanced = false;
          return;
        }
        const int o = stack.back();
        stack.pop_back();
        match[static_cast<std::size_t>(i)] = o;
        match[static_cast<std::size_t>(o)] = i;
        parent[static_cast<std::size_t>(i)] = stack.empty() ? -1 : stack.back();
      }
    }
    if (!stack.empty()) balanced = false;
  }
};

// ---------------------------------------------------------------------------------------------
// Structure: statements, loops, declarations and their scopes, writes.

struct Loop {
  int for_tok = 0, open = 0, close = 0;  // `for` and its header's parentheses
  int body_first = 0, body_last = 0;     // the body statement's first and last tokens
  int parent = -1;                       // index (in Structure::loops) of the enclosing loop
  bool innermost = true;                 // no other `for` in the body
  int line = 0;                          // 1-based line of `for`
};

struct Function {
  int params_open = 0, params_close = 0, body_open = 0, body_close = 0;
};

struct Decl {
  bool pointer = false, reference = false, array = false, arithmetic = false;
  bool is_float = false, is_double = false, param = false;
};

struct Update {
  std::string op;           // the reduction operator: "+", "*", "max", "min"
  int first = 0, last = 0;  // the tokens of the whole update (for the if form: from `if`)
};

bool IsAssignOp(const std::string& t) {
  return t == "=" || t == "+=" || t == "-=" || t == "*=" || t == "/=" || t == "%=" || t == "&=" || t == "|=" ||
         t == "^=" || t == "<<=" || t == ">>=";
}
bool IsMemberAccess(const std::string& t) { return t == "." || t == "->" || t == "::"; }

class Structure {
 public:
  explicit Structure(const Lexed& lx) : lx_(lx) {
    if (!lx_.balanced) return;
    FindConstructs();
    FindExternCFunctions();
  }

  const Lexed& lx() const { return lx_; }
  const std::vector<Loop>& loops() const { return loops_; }
  const std::vector<Function>& kernels() const { return kernels_; }

  // The last token of the statement that starts at token i, or -1 when it does not parse.
  int StatementEnd(int i) const {
    const int n = lx_.n();
    if (i < 0 || i >= n) return -1;
    const std::string& t = lx_.T(i);
    if (t == "{") return lx_.Match(i);
    if ((t == "for" || t == "while" || t == "switch") && lx_.T(i + 1) == "(") {
      const int close = lx_.Match(i + 1);
      return close < 0 ? -1 : StatementEnd(close + 1);
    }
    if (t == "if") {
      int j = i + 1;
      if (lx_.T(j) == "constexpr") ++j;
      if (lx_.T(j) != "(") return -1;
      const int e = StatementEnd(lx_.Match(j) + 1);
      if (e >= 0 && lx_.T(e + 1) == "else") return StatementEnd(e + 2);
      return e;
    }
    if (t == "do") {
      const int e = StatementEnd(i + 1);
      if (e < 0 || lx_.T(e + 1) != "while" || lx_.T(e + 2) != "(") return -1;
      const int close = lx_.Match(e + 2);
      return lx_.T(close + 1) == ";" ? close + 1 : -1;
    }
    return SemicolonFrom(i);
  }

  // The `;` ending the expression or declaration that starts at i (brackets skipped), or -1.
  int SemicolonFrom(int i) const {
    for (int j = i; j < lx_.n(); ++j) {
      const std::string& t = lx_.T(j);
      if (t == "(" || t == "[" || t == "{") {
        j = lx_.Match(j);
      } else if (t == ";") {
        return j;
      } else if (t == ")" || t == "]" || t == "}") {
        return -1;
      }
    }
    return -1;
  }

  // The declaration that token t introduces, if it is the declared name of one. Heuristic: the
  // tokens before it, back to the statement or parameter start, must look like a type.
  std::optional<Decl> DeclarationAt(int t) const {
    if (!lx_.IsIdent(t) || kKeywords.count(lx_.T(t)) || kArithmeticWords.count(lx_.T(t))) return std::nullopt;
    const std::string& next = lx_.T(t + 1);
    if (!(next == "=" || next == ";" || next == "," || next == "(" || next == "{" || next == "[" || next == ")" ||
          next == ":"))
      return std::nullopt;
    Decl d;
    d.array = next == "[";
    int angle = 0;
    bool saw_type = false, all_arith = true, core_arith = false;
    int k = t - 1;
    for (; k >= 0; --k) {
      const std::string& s = lx_.T(k);
      if (lx_.IsIdent(k)) {
        if (kKeywords.count(s)) return std::nullopt;
        saw_type = true;
        if (!kArithmeticWords.count(s)) all_arith = false;
        if (kArithmeticWords.count(s) && !kQualifierWords.count(s)) core_arith = true;
        if (s == "float") d.is_float = true;
        if (s == "double") d.is_double = true;
      } else if (s == "*") {
        d.pointer = true;
      } else if (s == "&" || s == "&&") {
        d.reference = true;
      } else if (s == "::") {
      } else if (s == ">" || s == ">>") {
        angle += static_cast<int>(s.size());
        all_arith = false;
      } else if (s == "<") {
        if (--angle < 0) return std::nullopt;
      } else if (s == "," && angle > 0) {
      } else {
        break;
      }
    }
    if (angle != 0 || !saw_type) return std::nullopt;
    const std::string& stop = lx_.T(k);
    if (!(k < 0 || stop == ";" || stop == "{" || stop == "}" || stop == "(" || stop == "," || stop == ":"))
      return std::nullopt;
    const int paren = lx_.Parent(t);
    const bool in_params =
        paren >= 0 && lx_.T(paren) == "(" && lx_.T(paren - 1) != "for" && BodyAfterParams(paren) >= 0;
    // `f(a * b)` and `g(x, y)` read like parameter lists; only a real one counts.
    if ((next == ")" || next == ",") && (stop == "(" || stop == ",") && !in_params) return std::nullopt;
    d.param = in_params;
    d.arithmetic = all_arith && core_arith && !d.pointer && !d.reference && !d.array;
    return d;
  }

  // The token range [first, last] in which a declaration at token t is visible; -1, n at file level.
  std::pair<int, int> ScopeOf(int t) const {
    for (int p = lx_.Parent(t); p >= 0; p = lx_.Parent(p)) {
      if (lx_.T(p) == "(") {
        if (lx_.T(p - 1) == "for") return {p, StatementEnd(lx_.Match(p) + 1)};
        const int body = BodyAfterParams(p);
        if (body >= 0) return {body, lx_.Match(body)};
      } else if (lx_.T(p) == "{") {
        return {p, lx_.Match(p)};
      }
    }
    return {-1, lx_.n()};
  }

  // The nearest declaration of `name` before token `before` whose scope holds token `at`.
  std::optional<Decl> FindDecl(const std::string& name, int before, int at) const {
    for (int k = before - 1; k >= 0; --k) {
      if (lx_.T(k) != name || !lx_.IsIdent(k) || IsMemberAccess(lx_.T(k - 1))) continue;
      const std::optional<Decl> d = DeclarationAt(k);
      if (!d) continue;
      const auto [first, last] = ScopeOf(k);
      if (first < at && at < last) return d;
    }
    return std::nullopt;
  }

  // The `{` of the body following the parameter list that opens at p, or -1.
  int BodyAfterParams(int p) const {
    if (!lx_.IsIdent(p - 1) && lx_.T(p - 1) != "]" && lx_.T(p - 1) != ">") return -1;
    int j = lx_.Match(p) + 1;
    while (j < lx_.n() && (lx_.T(j) == "const" || lx_.T(j) == "noexcept" || lx_.T(j) == "mutable" ||
                           lx_.T(j) == "override" || lx_.T(j) == "final"))
      ++j;
    return lx_.T(j) == "{" ? j : -1;
  }

  // A `break` at token k leaves the loop `loop` (not just a nested loop or switch).
  bool BreaksOut(int k, const Loop& loop) const {
    for (const auto& [first, last] : breakables_)
      if (first > loop.body_first && first <= k && k <= last && last <= loop.body_last) return false;
    return true;
  }

  struct Write {
    std::string name;
    int tok = 0;
    bool element = false;  // x[...] or x.member, not x itself
  };

  // Writes to named variables in tokens [first, last]: assignments, compound assignments, ++, --.
  // Writes through `->` or a dereference are not writes to a named variable; declarations are not
  // writes.
  std::vector<Write> WritesIn(int first, int last) const {
    std::vector<Write> writes;
    for (int t = first; t <= last; ++t) {
      if (!lx_.IsIdent(t) || kKeywords.count(lx_.T(t)) || IsMemberAccess(lx_.T(t - 1))) continue;
      int e = t;
      bool through_pointer = false;
      for (;;) {
        if (lx_.T(e + 1) == "[" && lx_.Match(e + 1) > 0) {
          e = lx_.Match(e + 1);
        } else if ((lx_.T(e + 1) == "." || lx_.T(e + 1) == "->") && lx_.IsIdent(e + 2)) {
          through_pointer |= lx_.T(e + 1) == "->";
          e += 2;
        } else {
          break;
        }
      }
      const std::string& after = lx_.T(e + 1);
      const bool written =
          IsAssignOp(after) || after == "++" || after == "--" || lx_.T(t - 1) == "++" || lx_.T(t - 1) == "--";
      // `*p = v` writes through p; `*p++` still moves p.
      const bool dereferenced =
          lx_.T(t - 1) == "*" && lx_.T(t - 2) != ")" && lx_.T(t - 2) != "]" && !lx_.IsIdent(t - 2);
      if (!written || through_pointer || (dereferenced && IsAssignOp(after))) continue;
      if (e == t && DeclarationAt(t)) continue;
      writes.push_back({lx_.T(t), t, e != t});
    }
    return writes;
  }

  // Text of tokens [first, last), single-spaced, with redundant outer parentheses removed.
  std::string Text(int first, int last) const {
    while (last - first >= 2 && lx_.T(first) == "(" && lx_.Match(first) == last - 1) {
      ++first;
      --last;
    }
    std::string s;
    for (int k = first; k < last; ++k) s += (k > first ? " " : "") + lx_.T(k);
    return s;
  }

  bool Mentions(int first, int last, const std::string& name) const {
    for (int k = first; k < last; ++k)
      if (lx_.T(k) == name && lx_.IsIdent(k) && !IsMemberAccess(lx_.T(k - 1))) return true;
    return false;
  }

  // "max" or "min" when `cond ? pick_true : pick_false` keeps the larger or smaller of `name` and
  // another expression, where cond compares the two.
  std::optional<std::string> MinMax(int c_first, int c_last, const std::string& pick_true,
                                    const std::string& pick_false, const std::string& name) const {
    while (c_last - c_first >= 2 && lx_.T(c_first) == "(" && lx_.Match(c_first) == c_last - 1) {
      ++c_first;
      --c_last;
    }
    int cmp = -1;
    for (int k = c_first; k < c_last; ++k) {
      const std::string& t = lx_.T(k);
      if (t == "(" || t == "[" || t == "{") {
        k = lx_.Match(k);
      } else if (t == ">" || t == "<" || t == ">=" || t == "<=") {
        if (cmp >= 0) return std::nullopt;
        cmp = k;
      } else if (t == "&&" || t == "||" || t == "?" || t == ":" || t == ",") {
        return std::nullopt;
      }
    }
    if (cmp < 0) return std::nullopt;
    const std::string left = Text(c_first, cmp), right = Text(cmp + 1, c_last);
    if ((left == name) == (right == name)) return std::nullopt;
    if (left == name ? Mentions(cmp + 1, c_last, name) : Mentions(c_first, cmp, name)) return std::nullopt;
    const bool left_larger = lx_.T(cmp)[0] == '>';
    const std::string& larger = left_larger ? left : right;
    const std::string& smaller = left_larger ? right : left;
    if (pick_true == larger && pick_false == smaller) return "max";
    if (pick_true == smaller && pick_false == larger) return "min";
    return std::nullopt;
  }

  // The reduction that the write of `name` at token w performs, if it is one of the recognised forms.
  std::optional<Update> RecognizeUpdate(int w, const std::string& name) const {
    const std::string& before = lx_.T(w - 1);
    if (!(before == ";" || before == "{" || before == "}" || before == ")" || before == "else")) return std::nullopt;
    const int semi = SemicolonFrom(w);
    if (semi < 0) return std::nullopt;
    const std::string& op = lx_.T(w + 1);
    const int rhs = w + 2;
    if (op == "+=" || op == "-=" || op == "*=") {
      if (Mentions(rhs, semi, name)) return std::nullopt;
      return Update{op == "*=" ? "*" : "+", w, semi};
    }
    if (op != "=") return std::nullopt;
    if (std::optional<Update> u = IfForm(w, semi, name)) return u;
    // x = cond ? a : b
    int question = -1, colon = -1, depth = 0;
    for (int k = rhs; k < semi; ++k) {
      const std::string& t = lx_.T(k);
      if (t == "(" || t == "[" || t == "{") {
        k = lx_.Match(k);
      } else if (t == "?") {
        if (question < 0) question = k;
        ++depth;
      } else if (t == ":" && question >= 0 && --depth == 0 && colon < 0) {
        colon = k;
      }
    }
    if (question >= 0 && colon >= 0) {
      const std::optional<std::string> mm =
          MinMax(rhs, question, Text(question + 1, colon), Text(colon + 1, semi), name);
      if (!mm) return std::nullopt;
      return Update{*mm, w, semi};
    }
    // x = std::max(x, a), fmaxf(a, x), ...
    int k = rhs;
    if (lx_.T(k) == "std" && lx_.T(k + 1) == "::") k += 2;
    const std::string& fn = lx_.T(k);
    std::string kind;
    if (fn == "max" || fn == "fmax" || fn == "fmaxf") kind = "max";
    if (fn == "min" || fn == "fmin" || fn == "fminf") kind = "min";
    if (kind.empty()) return std::nullopt;
    ++k;
    if (lx_.T(k) == "<") {
      while (k < semi && lx_.T(k) != ">") ++k;
      ++k;
    }
    if (lx_.T(k) != "(" || lx_.Match(k) != semi - 1) return std::nullopt;
    std::vector<std::pair<int, int>> args;
    int arg = k + 1;
    for (int j = k + 1; j < semi - 1; ++j) {
      if (lx_.T(j) == "(" || lx_.T(j) == "[" || lx_.T(j) == "{") {
        j = lx_.Match(j);
      } else if (lx_.T(j) == ",") {
        args.push_back({arg, j});
        arg = j + 1;
      }
    }
    args.push_back({arg, semi - 1});
    if (args.size() != 2) return std::nullopt;
    const bool first_is = Text(args[0].first, args[0].second) == name;
    const bool second_is = Text(args[1].first, args[1].second) == name;
    if (first_is == second_is) return std::nullopt;
    const auto& other = first_is ? args[1] : args[0];
    if (Mentions(other.first, other.second, name)) return std::nullopt;
    return Update{kind, w, semi};
  }

  // `if (a > x) x = a;` (or with braces) as a max/min update of x; no else.
  std::optional<Update> IfForm(int w, int semi, const std::string& name) const {
    int p = w - 1, last = semi;
    if (lx_.T(p) == "{") {
      if (lx_.T(semi + 1) != "}" || lx_.Match(p) != semi + 1) return std::nullopt;
      last = semi + 1;
      --p;
    }
    if (lx_.T(p) != ")") return std::nullopt;
    const int open = lx_.Match(p);
    if (lx_.T(open - 1) != "if" || lx_.T(open - 2) == "else" || lx_.T(last + 1) == "else") return std::nullopt;
    if (Mentions(w + 2, semi, name)) return std::nullopt;
    const std::optional<std::string> mm = MinMax(open + 1, p, Text(w + 2, semi), name, name);
    if (!mm) return std::nullopt;
    return Update{*mm, open - 1, last};
  }

  // The reduction clauses that make `loop` safe to run with its iterations interleaved (simd) or
  // spread over threads (parallel), or nullopt when some write makes it unsafe: a write to a scalar
  // from outside the loop that is not a recognised reduction, or one the loop also reads; a jump
  // out of the loop; for parallel loops, a write into a local array shared by all iterations.
  std::optional<std::vector<std::pair<std::string, std::string>>> Reductions(const Loop& loop, bool parallel) const {
    for (int k = loop.body_first; k <= loop.body_last; ++k) {
      const std::string& t = lx_.T(k);
      if (t == "return" || t == "goto" || t == "throw" || t == "co_return") return std::nullopt;
      if (t == "break" && BreaksOut(k, loop)) return std::nullopt;
    }
    std::set<std::string> private_names;
    for (int k = loop.open; k <= loop.body_last; ++k)
      if (DeclarationAt(k)) private_names.insert(lx_.T(k));
    const std::vector<Write> writes = WritesIn(loop.body_first, loop.body_last);
    std::vector<std::pair<std::string, std::string>> reductions;
    std::set<std::string> seen;
    for (const Write& w : writes) {
      if (private_names.count(w.name) || !seen.insert(w.name + (w.element ? "[]" : "")).second) continue;
      const std::optional<Decl> decl = FindDecl(w.name, loop.for_tok, loop.for_tok);
      if (w.element) {
        if (parallel && decl && !decl->pointer && !decl->reference && !decl->param) return std::nullopt;
        continue;
      }
      if (!decl || !decl->arithmetic) return std::nullopt;
      std::string op;
      std::vector<std::pair<int, int>> covered;
      for (const Write& other : writes) {
        if (other.name != w.name || other.element) continue;
        const std::optional<Update> u = RecognizeUpdate(other.tok, w.name);
        if (!u || (!op.empty() && op != u->op)) return std::nullopt;
        op = u->op;
        covered.push_back({u->first, u->last});
      }
      for (int k = loop.body_first; k <= loop.body_last; ++k) {
        if (lx_.T(k) != w.name || !lx_.IsIdent(k) || IsMemberAccess(lx_.T(k - 1))) continue;
        if (std::none_of(covered.begin(), covered.end(), [k](auto r) { return r.first <= k && k <= r.second; }))
          return std::nullopt;
      }
      reductions.push_back({op, w.name});
    }
    return reductions;
  }

  // The three clauses of a canonical `for (init; cond; incr)` are all there (OpenMP loops).
  bool Canonical(const Loop& loop) const {
    const std::vector<int> semis = HeaderSemicolons(loop);
    return semis.size() == 2 && semis[0] > loop.open + 1 && semis[1] > semis[0] + 1 && loop.close > semis[1] + 1;
  }

  // A range-for or a loop with a condition (GCC refuses to unroll `for (;;)`).
  bool HasCondition(const Loop& loop) const {
    const std::vector<int> semis = HeaderSemicolons(loop);
    return semis.empty() || (semis.size() == 2 && semis[1] > semis[0] + 1);
  }

 private:
  std::vector<int> HeaderSemicolons(const Loop& loop) const {
    std::vector<int> semis;
    for (int k = loop.open + 1; k < loop.close; ++k) {
      if (lx_.T(k) == "(" || lx_.T(k) == "[" || lx_.T(k) == "{")
        k = lx_.Match(k);
      else if (lx_.T(k) == ";")
        semis.push_back(k);
    }
    return semis;
  }

  void FindConstructs() {
    for (int i = 0; i < lx_.n(); ++i) {
      const std::string& t = lx_.T(i);
      if ((t == "for" || t == "while" || t == "switch") && lx_.T(i + 1) == "(") {
        const int close = lx_.Match(i + 1);
        const int last = StatementEnd(close + 1);
        if (last < 0) continue;
        breakables_.push_back({close + 1, last});
        if (t != "for") continue;
        Loop loop;
        loop.for_tok = i;
        loop.open = i + 1;
        loop.close = close;
        loop.body_first = close + 1;
        loop.body_last = last;
        loop.line = lx_.LineOf(lx_.toks[static_cast<std::size_t>(i)].begin);
        loops_.push_back(loop);
      } else if (t == "do") {
        const int last = StatementEnd(i + 1);
        if (last >= 0) breakables_.push_back({i + 1, last});
      }
    }
    for (std::size_t a = 0; a < loops_.size(); ++a)
      for (std::size_t b = 0; b < loops_.size(); ++b) {
        if (a == b) continue;
        const Loop& outer = loops_[b];
        Loop& inner = loops_[a];
        if (outer.body_first <= inner.for_tok && inner.for_tok <= outer.body_last) {
          loops_[b].innermost = false;
          if (inner.parent < 0 || loops_[static_cast<std::size_t>(inner.parent)].for_tok < outer.for_tok)
            inner.parent = static_cast<int>(b);
        }
      }
  }

  void FindExternCFunctions() {
    auto add = [&](int params) {
      const int body = BodyAfterParams(params);
      if (body >= 0) kernels_.push_back({params, lx_.Match(params), body, lx_.Match(body)});
    };
    for (int i = 0; i + 2 < lx_.n(); ++i) {
      if (lx_.T(i) != "extern" || lx_.T(i + 1) != "\"C\"") continue;
      const int j = i + 2;
      if (lx_.T(j) == "{") {
        for (int k = j + 1; k < lx_.Match(j); ++k)
          if (lx_.T(k) == "(" && lx_.Parent(k) == j) {
            add(k);
            k = lx_.Match(k);
          }
        continue;
      }
      for (int k = j; k < lx_.n() && lx_.T(k) != ";" && lx_.T(k) != "{"; ++k)
        if (lx_.T(k) == "(") {
          add(k);
          break;
        }
    }
  }

  const Lexed& lx_;
  std::vector<Loop> loops_;
  std::vector<Function> kernels_;
  std::vector<std::pair<int, int>> breakables_;  // bodies of for/while/do/switch, as token ranges
};

// ---------------------------------------------------------------------------------------------
// Editing.

struct Edit {
  std::size_t at = 0, erase = 0;
  std::string insert;
};

std::string Apply(const std::string& src, std::vector<Edit> edits) {
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.at > b.at; });
  std::string out = src;
  for (const Edit& e : edits) out.replace(e.at, e.erase, e.insert);
  return out;
}

std::string_view Trimmed(std::string_view s) {
  while (!s.empty() && (IsBlank(s.front()) || s.front() == '\n')) s.remove_prefix(1);
  while (!s.empty() && (IsBlank(s.back()) || s.back() == '\n')) s.remove_suffix(1);
  return s;
}

// The words of a preprocessor line ("#  pragma omp simd" -> {"pragma", "omp", "simd"}), or none.
std::vector<std::string> DirectiveWords(std::string_view line) {
  line = Trimmed(line);
  if (line.empty() || line.front() != '#') return {};
  std::vector<std::string> words;
  std::string word;
  for (char c : line.substr(1)) {
    if (IsIdentChar(c)) {
      word += c;
    } else if (!word.empty()) {
      words.push_back(word);
      word.clear();
    }
    if (!IsIdentChar(c) && !IsBlank(c) && words.size() >= 2) break;
  }
  if (!word.empty()) words.push_back(word);
  return words;
}

bool IsPragma(std::string_view line) {
  const auto w = DirectiveWords(line);
  return !w.empty() && w[0] == "pragma";
}

// Where a line may be inserted in front of a loop: the loop's `for` opens its line.
struct LoopSite {
  bool first_on_line = false;
  bool pragma_above = false;  // the nearest non-blank line above is a pragma
  std::size_t line_start = 0;
  std::size_t above_pragmas = 0;  // line start above the pragmas that belong to the loop
  std::string indent;
};

LoopSite SiteOf(const Lexed& lx, const Loop& loop) {
  LoopSite site;
  const std::size_t at = lx.toks[static_cast<std::size_t>(loop.for_tok)].begin;
  site.line_start = lx.LineStart(at);
  const std::string_view before = std::string_view(lx.code).substr(site.line_start, at - site.line_start);
  site.first_on_line = std::all_of(before.begin(), before.end(), IsBlank);
  site.indent = lx.src.substr(site.line_start, at - site.line_start);
  site.above_pragmas = site.line_start;
  bool nearest = true;
  for (int line = loop.line - 1; line >= 1; --line) {
    const std::string_view text = lx.CodeLine(line);
    if (Trimmed(text).empty()) continue;
    if (!IsPragma(text)) break;
    if (nearest) site.pragma_above = true;
    nearest = false;
    site.above_pragmas = lx.line_starts[static_cast<std::size_t>(line - 1)];
  }
  return site;
}

std::string Clauses(const std::vector<std::pair<std::string, std::string>>& reductions) {
  std::string s;
  for (const auto& [op, name] : reductions) s += " reduction(" + op + ":" + name + ")";
  return s;
}

std::string AtLine(const Loop& loop) { return " on the loop at line " + std::to_string(loop.line); }

// ---------------------------------------------------------------------------------------------
// The operators.

void OmpSimd(const Structure& st, std::vector<Mutation>& out) {
  const Lexed& lx = st.lx();
  for (const Loop& loop : st.loops()) {
    const LoopSite site = SiteOf(lx, loop);
    if (!site.first_on_line || site.pragma_above || !st.Canonical(loop)) continue;
    // OpenMP allows only simd-compatible constructs inside a simd region.
    bool nested_omp = false;
    const int first_line = lx.LineOf(lx.toks[static_cast<std::size_t>(loop.body_first)].begin);
    const int last_line = lx.LineOf(lx.toks[static_cast<std::size_t>(loop.body_last)].begin);
    for (int line = first_line; line <= last_line; ++line) {
      const auto w = DirectiveWords(lx.CodeLine(line));
      if (w.size() >= 2 && w[0] == "pragma" && w[1] == "omp" && (w.size() < 3 || w[2] != "simd")) nested_omp = true;
    }
    if (nested_omp) continue;
    const auto reductions = st.Reductions(loop, /*parallel=*/false);
    if (!reductions) continue;
    const std::string clauses = Clauses(*reductions);
    out.push_back({"omp_simd", "omp simd" + clauses + AtLine(loop),
                   Apply(lx.src, {{site.line_start, 0, site.indent + "#pragma omp simd" + clauses + "\n"}})});
  }
}

void Unroll(const Structure& st, std::vector<Mutation>& out) {
  for (const Loop& loop : st.loops()) {
    if (!loop.innermost || !st.HasCondition(loop)) continue;
    const LoopSite site = SiteOf(st.lx(), loop);
    if (!site.first_on_line || site.pragma_above) continue;
    for (int factor : {4, 8}) {
      const std::string pragma = "GCC unroll " + std::to_string(factor);
      out.push_back({"unroll", pragma + AtLine(loop),
                     Apply(st.lx().src, {{site.line_start, 0, site.indent + "#pragma " + pragma + "\n"}})});
    }
  }
}

void Restrict(const Structure& st, std::vector<Mutation>& out) {
  const Lexed& lx = st.lx();
  std::vector<Edit> edits;
  for (const Function& fn : st.kernels()) {
    int param = fn.params_open + 1;
    int angle = 0;
    for (int k = fn.params_open + 1; k <= fn.params_close; ++k) {
      const std::string& t = lx.T(k);
      if (t == "<") ++angle;
      if (t == ">") --angle;
      if (t == ">>") angle -= 2;
      if (k < fn.params_close && (t != "," || angle > 0)) {
        if ((t == "(" || t == "[" || t == "{")) k = lx.Match(k);
        continue;
      }
      // Parameter [param, k): a plain pointer (not a function pointer) without a restrict already.
      int star = -1;
      bool skip = false;
      for (int j = param; j < k; ++j) {
        const std::string& s = lx.T(j);
        if (s == "*") star = j;
        if (s == "(" || s == "[" || s == "__restrict" || s == "__restrict__" || s == "restrict") skip = true;
      }
      if (star >= 0 && !skip) {
        const std::size_t at = lx.toks[static_cast<std::size_t>(star)].end;
        const bool spaced = at < lx.src.size() && IsBlank(lx.src[at]);
        edits.push_back({at, 0, spaced ? " __restrict" : " __restrict "});
      }
      param = k + 1;
    }
  }
  if (!edits.empty())
    out.push_back({"restrict", "__restrict on the kernel's pointer parameters", Apply(lx.src, std::move(edits))});
}

// Written for this operator: Cephes-style expf. Branch-free, no libm, no floorf: the loops that
// call it still vectorize. Accurate to about 1 ulp on the clamped range; exp(-inf) gives about
// 1.6e-38 instead of 0. The 1.5 * 2^23 rounding trick needs IEEE float addition (no -ffast-math).
constexpr std::string_view kExpPoly = R"(
// Added by the exp_poly mutation: exp(v) = 2^n * exp(r), v = n*ln2 + r, |r| <= ln2/2, with a
// degree-6 polynomial for exp(r) (Cephes expf coefficients). Branch-free, so loops still vectorize.
static inline float kg_exp_poly(float v) {
    // Clamp v to [-87, 88] so that 2^n stays a normal float. On the bits: a float compare may
    // trap, so g++ makes a float select vector code only where AVX-512 masks it; an integer min
    // vectorizes on every x86. As signed integers, float bits grow with a positive value and with
    // a negative value's magnitude: one min against each sign's bound.
    int vb;
    std::memcpy(&vb, &v, sizeof(vb));
    const int bound = vb < 0 ? -1028784128 /* -87.0f */ : 1118830592 /* 88.0f */;
    vb = vb < bound ? vb : bound;
    std::memcpy(&v, &vb, sizeof(v));
    const float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
    const float n = (v * 1.44269504088896341f + kRound) - kRound;
    float r = v - n * 0.693359375f;    // ln2 in two parts (Cody-Waite) keeps r accurate
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    const int bits = (static_cast<int>(n) + 127) << 23;  // 2^n: n in [-126, 127] after the clamp
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}
)";

void ExpPoly(const Lexed& lx, std::vector<Mutation>& out) {
  std::vector<Edit> edits;
  for (int i = 0; i < lx.n(); ++i) {
    if (lx.T(i) == "kg_exp_poly") return;  // already applied
    if (!lx.IsIdent(i) || (lx.T(i) != "exp" && lx.T(i) != "expf") || lx.T(i + 1) != "(") continue;
    const std::string& prev = lx.T(i - 1);
    if (prev == "." || prev == "->") continue;
    std::size_t from = lx.toks[static_cast<std::size_t>(i)].begin;
    if (prev == "::") {
      if (lx.T(i - 2) == "std") {
        from = lx.toks[static_cast<std::size_t>(i - 2)].begin;
      } else if (lx.IsIdent(i - 2)) {
        continue;  // some other namespace's exp
      } else {
        from = lx.toks[static_cast<std::size_t>(i - 1)].begin;
      }
    } else if (lx.IsIdent(i - 1) && !kKeywords.count(prev)) {
      continue;  // `float exp(` declares a function named exp
    }
    edits.push_back({from, lx.toks[static_cast<std::size_t>(i)].end - from, "kg_exp_poly"});
  }
  if (edits.empty()) return;
  const std::size_t calls = edits.size();
  // The helper goes after the last #include, which ends the preamble.
  std::size_t at = 0;
  bool has_cstring = false;
  for (int line = 1; line <= static_cast<int>(lx.line_starts.size()); ++line) {
    const auto w = DirectiveWords(lx.CodeLine(line));
    if (w.empty() || w[0] != "include") continue;
    if (lx.CodeLine(line).find("<cstring>") != std::string_view::npos) has_cstring = true;
    at = static_cast<std::size_t>(line) < lx.line_starts.size() ? lx.line_starts[static_cast<std::size_t>(line)]
                                                                : lx.src.size();
  }
  std::string helper = std::string(kExpPoly);
  if (at == 0) helper = helper.substr(1) + "\n";  // no includes: the helper opens the file
  if (!has_cstring) helper = "#include <cstring>\n" + helper;
  if (at == lx.src.size() && !lx.src.empty() && lx.src.back() != '\n') helper = "\n" + helper;
  edits.push_back({at, 0, helper});
  out.push_back(
      {"exp_poly",
       "polynomial exp instead of the libm call (" + std::to_string(calls) + (calls == 1 ? " call)" : " calls)"),
       Apply(lx.src, std::move(edits))});
}

void HoistDivision(const Structure& st, std::vector<Mutation>& out) {
  const Lexed& lx = st.lx();
  for (const Loop& loop : st.loops()) {
    const LoopSite site = SiteOf(lx, loop);
    // The reciprocal is a statement: the loop must sit in a block, not be another statement's body.
    const std::string& before = lx.T(loop.for_tok - 1);
    if (!site.first_on_line || !(before == ";" || before == "{" || before == "}" || loop.for_tok == 0)) continue;
    std::set<std::string> assigned;
    for (const auto& w : st.WritesIn(loop.open, loop.body_last)) assigned.insert(w.name);
    for (int k = loop.open; k <= loop.body_last; ++k)
      if (st.DeclarationAt(k)) assigned.insert(lx.T(k));  // a local of the loop: not invariant
    std::vector<std::string> divisors;
    std::vector<Edit> edits;
    std::string hoisted;
    for (int k = loop.body_first; k < loop.body_last; ++k) {
      // `e / s` (same precedence as `*`: `e * inv` parses alike) or the whole right side of `/=`.
      const bool compound = lx.T(k) == "/=";
      if ((lx.T(k) != "/" && !compound) || !lx.IsIdent(k + 1)) continue;
      const std::string& s = lx.T(k + 1);
      const std::string& after = lx.T(k + 2);
      if (compound && after != ";") continue;
      if (kKeywords.count(s) || after == "(" || after == "[" || after == "." || after == "->" || after == "::" ||
          after == "++" || after == "--" || assigned.count(s))
        continue;
      const std::string inv = "kg_inv_" + s;
      if (lx.src.find(inv) != std::string::npos) continue;
      const std::optional<Decl> decl = st.FindDecl(s, loop.for_tok, loop.for_tok);
      if (!decl || !decl->arithmetic || !(decl->is_float || decl->is_double)) continue;
      if (std::find(divisors.begin(), divisors.end(), s) == divisors.end()) {
        divisors.push_back(s);
        hoisted += site.indent + (decl->is_double ? "const double " + inv + " = 1.0 / " + s + ";\n"
                                                  : "const float " + inv + " = 1.0f / " + s + ";\n");
      }
      const std::size_t from = lx.toks[static_cast<std::size_t>(k)].begin;
      edits.push_back({from, lx.toks[static_cast<std::size_t>(k + 1)].end - from, (compound ? "*= " : "* ") + inv});
    }
    if (divisors.empty()) continue;
    std::string names;
    for (const std::string& d : divisors) names += (names.empty() ? "" : ", ") + d;
    edits.push_back({site.above_pragmas, 0, hoisted});
    out.push_back({"hoist_division",
                   (divisors.size() == 1 ? "reciprocal of " : "reciprocals of ") + names +
                       " hoisted out of the loop at line " + std::to_string(loop.line),
                   Apply(lx.src, std::move(edits))});
  }
}

void ParallelFor(const Structure& st, std::vector<Mutation>& out) {
  const Lexed& lx = st.lx();
  for (const Loop& loop : st.loops()) {
    if (loop.parent >= 0) continue;
    // Only the kernel's own loops (all loops when no extern "C" function is found).
    if (!st.kernels().empty() && std::none_of(st.kernels().begin(), st.kernels().end(), [&](const Function& f) {
          return f.body_open < loop.for_tok && loop.for_tok < f.body_close;
        }))
      continue;
    const LoopSite site = SiteOf(lx, loop);
    if (!site.first_on_line || site.pragma_above || !st.Canonical(loop)) continue;
    const auto reductions = st.Reductions(loop, /*parallel=*/true);
    if (!reductions) continue;
    const std::string clauses = Clauses(*reductions);
    out.push_back({"parallel_for", "omp parallel for" + clauses + AtLine(loop),
                   Apply(lx.src, {{site.line_start, 0, site.indent + "#pragma omp parallel for" + clauses + "\n"}})});
  }
}

}  // namespace

const std::vector<std::string>& MutationOperators() {
  static const std::vector<std::string> kOperators = {"omp_simd", "unroll",         "restrict",
                                                      "exp_poly", "hoist_division", "parallel_for"};
  return kOperators;
}

std::vector<Mutation> EnumerateMutations(const std::string& source) {
  const Lexed lx(source);
  const Structure st(lx);  // empty (no loops, no kernels) when the brackets do not balance
  std::vector<Mutation> all;
  OmpSimd(st, all);
  Unroll(st, all);
  Restrict(st, all);
  ExpPoly(lx, all);
  HoistDivision(st, all);
  ParallelFor(st, all);
  std::vector<Mutation> out;
  std::set<std::string> sources = {source};
  for (Mutation& m : all)
    if (sources.insert(m.source).second) out.push_back(std::move(m));
  return out;
}

}  // namespace kernelgym::search
