#include "policies/roles/prompt_template.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace kernelgym::roles {
namespace {

constexpr std::string_view kSystemMarker = "--- system ---";
constexpr std::string_view kUserMarker = "--- user ---";

struct Tag {
  std::size_t begin = std::string::npos, end = 0;  // [begin, end) covers "{{...}}"
  char kind = 0;  // 0: variable, '#': section start, '^': inverted section start, '/': section end
  std::string name;
};

Tag NextTag(const std::string& text, std::size_t from) {
  Tag tag;
  const std::size_t open = text.find("{{", from);
  if (open == std::string::npos) return tag;
  const std::size_t close = text.find("}}", open + 2);
  if (close == std::string::npos) return tag;
  tag.begin = open;
  tag.end = close + 2;
  std::string inner = text.substr(open + 2, close - open - 2);
  if (!inner.empty() && (inner[0] == '#' || inner[0] == '^' || inner[0] == '/')) {
    tag.kind = inner[0];
    inner.erase(0, 1);
  }
  tag.name = inner;
  return tag;
}

bool IsName(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

int LineOf(const std::string& text, std::size_t offset) {
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

// Checks tags and sections of one part; records the names used.
bool Check(const std::string& text, const std::set<std::string>& known, const std::string& where, int first_line,
           std::set<std::string>& used, std::string& error) {
  std::vector<std::string> open;
  for (Tag tag = NextTag(text, 0); tag.begin != std::string::npos; tag = NextTag(text, tag.end)) {
    const std::string at = where + ":" + std::to_string(first_line + LineOf(text, tag.begin) - 1);
    if (!IsName(tag.name)) {
      error = at + ": '" + text.substr(tag.begin, tag.end - tag.begin) +
              "' is not {{name}}, {{#name}}, {{^name}} or {{/name}}";
      return false;
    }
    if (!known.count(tag.name)) {
      std::string names;
      for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
      error = at + ": unknown variable '" + tag.name + "' (this role has: " + names + ")";
      return false;
    }
    used.insert(tag.name);
    if (tag.kind == '#' || tag.kind == '^') open.push_back(tag.name);
    if (tag.kind == '/') {
      if (open.empty() || open.back() != tag.name) {
        error = at + ": {{/" + tag.name + "}} closes " + (open.empty() ? "no open section" : "the section of " + open.back());
        return false;
      }
      open.pop_back();
    }
  }
  if (!open.empty()) {
    error = where + ": the section of " + open.back() + " is never closed";
    return false;
  }
  return true;
}

// Renders text[from, to) until the matching {{/stop}} (or the end when stop is empty); returns
// the offset just past what it consumed.
std::size_t Render(const std::string& text, std::size_t from, const std::string& stop, const Variables& variables,
                   bool emit, std::string& out) {
  std::size_t at = from;
  while (true) {
    const Tag tag = NextTag(text, at);
    if (tag.begin == std::string::npos) {
      if (emit) out.append(text, at, std::string::npos);
      return text.size();
    }
    if (emit) out.append(text, at, tag.begin - at);
    if (tag.kind == '/' && tag.name == stop) return tag.end;
    if (tag.kind == '#' || tag.kind == '^') {
      const auto it = variables.find(tag.name);
      const bool set = it != variables.end() && !it->second.empty();
      at = Render(text, tag.end, tag.name, variables, emit && (set == (tag.kind == '#')), out);
      continue;
    }
    if (tag.kind == 0 && emit) {
      const auto it = variables.find(tag.name);
      if (it != variables.end()) out += it->second;
    }
    at = tag.end;
  }
}

std::string Trimmed(std::string s) {
  const std::size_t first = s.find_first_not_of("\n");
  if (first == std::string::npos) return "";
  s.erase(0, first);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

std::string RenderTemplateText(const std::string& text, const Variables& variables) {
  std::string out;
  Render(text, 0, "", variables, true, out);
  return out;
}

std::optional<PromptTemplate> PromptTemplate::Parse(const std::string& text, const std::set<std::string>& known,
                                                    const std::string& where, std::string& error) {
  const std::size_t system = text.find(kSystemMarker);
  const std::size_t user = text.find(kUserMarker);
  if (system == std::string::npos || user == std::string::npos || user < system) {
    error = where + ": needs a '" + std::string(kSystemMarker) + "' line followed by a '" + std::string(kUserMarker) +
            "' line";
    return std::nullopt;
  }
  PromptTemplate t;
  const std::size_t system_body = system + kSystemMarker.size();
  const std::size_t user_body = user + kUserMarker.size();
  t.system_ = Trimmed(text.substr(system_body, user - system_body));
  t.user_ = Trimmed(text.substr(user_body));
  if (!Check(text.substr(system_body, user - system_body), known, where, LineOf(text, system_body), t.used_, error) ||
      !Check(text.substr(user_body), known, where, LineOf(text, user_body), t.used_, error))
    return std::nullopt;
  return t;
}

std::optional<PromptTemplate> PromptTemplate::Load(const std::filesystem::path& file, const std::set<std::string>& known,
                                                   std::string& error) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    error = "cannot read prompt file " + file.string();
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), known, file.string(), error);
}

std::string PromptTemplate::RenderSystem(const Variables& variables) const { return RenderTemplateText(system_, variables); }
std::string PromptTemplate::RenderUser(const Variables& variables) const { return RenderTemplateText(user_, variables); }

}  // namespace kernelgym::roles
