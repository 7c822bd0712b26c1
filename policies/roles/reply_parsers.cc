#include "policies/roles/reply_parsers.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "core/backend_info.h"

namespace kernelgym::roles {
namespace {

std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> lines;
  std::string line;
  std::istringstream in{std::string(text)};
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  return lines;
}

std::string Trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return "";
  const auto last = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(first, last - first + 1));
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// The languages a backend's whole-kernel block may be tagged with ("" = untagged).
std::set<std::string> KernelLanguages(std::string_view backend) {
  const std::vector<std::string>& tags = BackendInfoOr(backend).fence_tags;
  return {tags.begin(), tags.end()};
}

std::optional<CodeBlock> LastKernelBlock(const std::vector<CodeBlock>& blocks, std::string_view backend,
                                         std::string_view entry_point = {}) {
  const std::set<std::string> languages = KernelLanguages(backend);
  std::optional<CodeBlock> last;
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    if (!languages.count(it->language)) continue;
    if (entry_point.empty() || DefinesFunction(it->text, entry_point)) return *it;
    if (!last) last = *it;
  }
  return last;
}

// The fence's language: the info string's first word, cut at ':' or '{', lower case.
std::string FenceInfoLanguage(std::string_view info) {
  std::string word;
  std::istringstream in{std::string(info)};
  in >> word;
  word = word.substr(0, word.find_first_of(":{"));
  return Lower(word);
}

// SEARCH/REPLACE blocks anywhere in the reply (inside a fence or not).
bool ParseSearchReplace(const std::vector<std::string>& lines, std::vector<protocol::EditBlock>& blocks,
                        std::string& error) {
  enum { kOutside, kSearch, kReplace } state = kOutside;
  protocol::EditBlock block;
  auto append = [](std::string& to, const std::string& line) { to += line + "\n"; };
  for (const std::string& raw : lines) {
    const std::string line = Trim(raw);
    const bool search = StartsWith(line, "<<<<<<<") && line.find("SEARCH") != std::string::npos;
    const bool divider = line.size() >= 5 && line.find_first_not_of('=') == std::string::npos;
    const bool replace = StartsWith(line, ">>>>>>>") && line.find("REPLACE") != std::string::npos;
    if (state == kOutside) {
      if (search) {
        state = kSearch;
        block = {};
      }
    } else if (state == kSearch) {
      if (divider) state = kReplace;
      else if (search || replace) {
        error = "a SEARCH/REPLACE block has no ======= line";
        return false;
      } else append(block.search, raw);
    } else {
      if (replace) {
        if (Trim(block.search).empty()) {
          error = "a SEARCH/REPLACE block has an empty SEARCH part";
          return false;
        }
        blocks.push_back(block);
        state = kOutside;
      } else append(block.replace, raw);
    }
  }
  if (state != kOutside) {
    error = "a SEARCH/REPLACE block is not closed with >>>>>>> REPLACE (the reply was cut?)";
    return false;
  }
  return true;
}

std::set<std::string> Placeholders(const std::string& text) {
  std::set<std::string> names;
  // Bounded: libstdc++'s regex recurses once per repeated character, and an unbounded run (a
  // degenerate reply's "@AAAA..." of some 50k characters) overflows the stack.
  static const std::regex placeholder(R"(@([A-Z][A-Z0-9_]{0,63})@)");
  for (std::sregex_iterator it(text.begin(), text.end(), placeholder), end; it != end; ++it) names.insert((*it)[1]);
  return names;
}

}  // namespace

std::string_view FenceLanguage(std::string_view backend) { return BackendInfoOr(backend).language; }

std::vector<CodeBlock> FencedBlocks(std::string_view reply, bool* unterminated) {
  std::vector<CodeBlock> blocks;
  std::optional<CodeBlock> open;
  for (const std::string& raw : Lines(reply)) {
    const std::string line = Trim(raw);
    if (!open) {
      if (StartsWith(line, "```")) {
        CodeBlock b;
        b.language = FenceInfoLanguage(std::string_view(line).substr(3));
        open = b;
      }
    } else if (line == "```") {
      blocks.push_back(*open);
      open.reset();
    } else {
      open->text += raw + "\n";
    }
  }
  if (unterminated) *unterminated = open.has_value();
  return blocks;
}

PlanOrError ParsePlan(std::string_view reply) {
  // Key words of each section's heading, in kPlanSections order.
  static const std::vector<std::vector<std::string>> kKeys = {
      {"analysis"}, {"strategy"}, {"memory", "tiling", "layout"}, {"hardware"}, {"impact"}};
  static const std::regex numbered(R"(^\d+[.)]\s)");
  Plan plan;
  plan.text = std::string(reply);
  int current = -1;
  for (const std::string& raw : Lines(reply)) {
    const std::string line = Trim(raw);
    const bool heading_shape = line.size() <= 80 && (StartsWith(line, "#") || StartsWith(line, "**") ||
                                                     std::regex_search(line, numbered));
    int section = -1;
    if (heading_shape) {
      const std::string lower = Lower(line);
      for (std::size_t i = 0; i < kKeys.size() && section < 0; ++i)
        for (const std::string& key : kKeys[i])
          if (lower.find(key) != std::string::npos) section = static_cast<int>(i);
    }
    if (section >= 0) {
      current = section;
      plan.sections[kPlanSections[section]];  // present, even if its body is on later lines
      continue;
    }
    if (current >= 0 && !line.empty()) plan.sections[kPlanSections[current]] += raw + "\n";
  }
  std::string missing;
  for (const char* name : kPlanSections) {
    auto it = plan.sections.find(name);
    if (it == plan.sections.end() || Trim(it->second).empty()) missing += (missing.empty() ? "" : ", ") + std::string(name);
  }
  if (!missing.empty()) return {std::nullopt, "the plan has no (or an empty) section: " + missing};
  return {plan, ""};
}

std::string EntryPoint(std::string_view signature) {
  const std::size_t paren = signature.find('(');
  if (paren == std::string_view::npos) return "";
  std::size_t end = paren;
  while (end > 0 && signature[end - 1] == ' ') --end;
  std::size_t begin = end;
  while (begin > 0 && (std::isalnum(static_cast<unsigned char>(signature[begin - 1])) || signature[begin - 1] == '_')) --begin;
  return std::string(signature.substr(begin, end - begin));
}

bool DefinesFunction(std::string_view code, std::string_view name) {
  if (name.empty()) return false;
  auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (std::size_t at = code.find(name); at != std::string_view::npos; at = code.find(name, at + 1)) {
    if (at > 0 && is_word(code[at - 1])) continue;
    std::size_t i = at + name.size();
    if (i < code.size() && is_word(code[i])) continue;
    // Python: "def NAME(" at the start of a line.
    const std::size_t line_start = code.rfind('\n', at) == std::string_view::npos ? 0 : code.rfind('\n', at) + 1;
    const std::string before = Trim(code.substr(line_start, at - line_start));
    while (i < code.size() && std::isspace(static_cast<unsigned char>(code[i]))) ++i;
    if (i >= code.size() || code[i] != '(') continue;
    if (before == "def" || before == "async def") return true;
    // C-style: the parameter list, then (after qualifiers such as const or noexcept) a body.
    int depth = 0;
    for (; i < code.size(); ++i) {
      if (code[i] == '(') ++depth;
      else if (code[i] == ')' && --depth == 0) break;
    }
    if (i >= code.size()) continue;
    for (++i; i < code.size(); ++i) {
      const char c = code[i];
      if (c == '{') return true;
      if (c == ';' || c == '(' || c == ')' || c == ',' || c == '=' || c == '}') break;
    }
  }
  return false;
}

ActionOrError ParseKernelEdit(std::string_view reply, std::string_view backend, std::string_view entry_point) {
  const std::vector<std::string> lines = Lines(reply);
  std::vector<protocol::EditBlock> edits;
  std::string error;
  if (!ParseSearchReplace(lines, edits, error)) return {std::nullopt, error};
  if (!edits.empty()) return {protocol::EditAction{std::move(edits)}, ""};

  bool unterminated = false;
  const std::vector<CodeBlock> blocks = FencedBlocks(reply, &unterminated);
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    if (it->language == "diff" || it->language == "patch") return {protocol::PatchAction{it->text}, ""};
  }
  if (const std::optional<CodeBlock> kernel = LastKernelBlock(blocks, backend, entry_point)) {
    if (Trim(kernel->text).empty()) return {std::nullopt, "the code block is empty"};
    return {protocol::ReplaceAction{kernel->text}, ""};
  }
  if (unterminated) return {std::nullopt, "the reply ends inside a code block (it was cut at max_tokens?)"};
  if (!blocks.empty())
    return {std::nullopt, "no ```" + std::string(FenceLanguage(backend)) + " block (found only ```" +
                              blocks.back().language + ")"};
  return {std::nullopt, "no code: expected a ```" + std::string(FenceLanguage(backend)) +
                            " block with the whole kernel, SEARCH/REPLACE blocks, or a ```diff block"};
}

std::string_view DecisionName(Decision d) {
  switch (d) {
    case Decision::kContinue: return "continue";
    case Decision::kTune: return "tune";
    case Decision::kStop: return "stop";
  }
  return "continue";
}

AnalysisOrError ParseAnalysis(std::string_view reply) {
  static const std::regex decision_line(R"(^[\s*_#>`-]*decision[\s*_`]*[:\-][\s*_`]*(continue|tune|stop)\b[\s*_`]*[:\-]?\s*(.*)$)",
                                        std::regex::icase);
  // libstdc++'s regex recurses once per character the line's repetitions match: a degenerate
  // reply's line of ~50k dashes overflows the stack. A decision line is short.
  constexpr std::size_t kMaxDecisionLine = 1000;
  Analysis analysis;
  bool found = false;
  for (const std::string& raw : Lines(reply)) {
    std::smatch m;
    if (raw.size() <= kMaxDecisionLine && std::regex_match(raw, m, decision_line)) {
      const std::string word = Lower(m[1]);
      analysis.decision = word == "stop" ? Decision::kStop : word == "tune" ? Decision::kTune : Decision::kContinue;
      analysis.reason = Trim(m[2].str());
      found = true;
      continue;
    }
    analysis.bottlenecks += raw + "\n";
  }
  if (!found) return {std::nullopt, "no 'DECISION: CONTINUE | TUNE | STOP' line"};
  return {analysis, ""};
}

TunerOrError ParseTunerProposal(std::string_view reply, std::string_view backend, bool needs_template) {
  bool unterminated = false;
  const std::vector<CodeBlock> blocks = FencedBlocks(reply, &unterminated);
  const CodeBlock* json_block = nullptr;
  for (const CodeBlock& b : blocks)
    if (b.language == "json") json_block = &b;
  if (!json_block)
    return {std::nullopt, unterminated ? "the reply ends inside a code block (it was cut at max_tokens?)"
                                       : "no ```json block with the search space"};
  const nlohmann::json parsed = nlohmann::json::parse(json_block->text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return {std::nullopt, "the ```json block is not valid JSON"};
  const nlohmann::json* space = parsed.contains("space") ? &parsed["space"] : nullptr;
  if (!space || !space->is_object() || space->empty())
    return {std::nullopt, "the JSON needs a non-empty \"space\" map: {\"space\": {\"NAME\": [values...]}}"};
  TunerProposal proposal;
  for (const auto& [name, values] : space->items()) {
    if (!values.is_array() || values.empty())
      return {std::nullopt, "space." + name + " must be a non-empty array of values"};
    for (const nlohmann::json& v : values) {
      const std::optional<protocol::KnobValue> value = protocol::KnobValueFromJson(v);
      if (!value) return {std::nullopt, "space." + name + " has a value that is not a number or a string"};
      proposal.space[name].push_back(*value);
    }
  }
  if (needs_template) {
    std::vector<CodeBlock> kernels;
    for (const CodeBlock& b : blocks)
      if (&b != json_block) kernels.push_back(b);
    const std::optional<CodeBlock> kernel = LastKernelBlock(kernels, backend);
    if (!kernel) return {std::nullopt, "no ```" + std::string(FenceLanguage(backend)) + " block with the templated kernel"};
    const std::set<std::string> used = Placeholders(kernel->text);
    for (const auto& [name, values] : proposal.space)
      if (!used.count(name)) return {std::nullopt, "knob " + name + " is in the space but @" + name + "@ is not in the kernel"};
    for (const std::string& name : used)
      if (!proposal.space.count(name)) return {std::nullopt, "@" + name + "@ in the kernel has no values in the space"};
    proposal.template_source = kernel->text;
  }
  return {proposal, ""};
}

std::string InstantiateTemplate(const std::string& template_source,
                                const std::map<std::string, protocol::KnobValue>& values) {
  std::string out = template_source;
  for (const auto& [name, value] : values) {
    const std::string text = protocol::KnobValueText(value);
    const std::string placeholder = "@" + name + "@";
    for (std::size_t at = out.find(placeholder); at != std::string::npos; at = out.find(placeholder, at + text.size()))
      out.replace(at, placeholder.size(), text);
  }
  return out;
}

}  // namespace kernelgym::roles
