#include "policies/roles/model_reply.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <nlohmann/json.hpp>

namespace kernelgym::roles {
namespace {

constexpr std::array<std::string_view, 3> kThinkingTags = {"think", "thinking", "reasoning"};

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

struct TagHit {
  std::size_t at = std::string::npos;
  std::size_t length = 0;
  std::string_view name;
};

// The earliest of the thinking tags (opening or closing, per `closing`) at or after `from`, in the
// lower-cased text.
TagHit FindTag(const std::string& lower, std::size_t from, bool closing, std::string_view only = {}) {
  TagHit best;
  for (std::string_view name : kThinkingTags) {
    if (!only.empty() && name != only) continue;
    const std::string tag = std::string(closing ? "</" : "<") + std::string(name) + ">";
    const std::size_t at = lower.find(tag, from);
    if (at < best.at) best = {at, tag.size(), name};
  }
  return best;
}

void AppendParagraph(std::string& to, std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return;
  const auto last = text.find_last_not_of(" \t\r\n");
  if (!to.empty()) to += "\n\n";
  to += text.substr(first, last - first + 1);
}

bool LooksLikeDiff(std::string_view key, std::string_view value) {
  return key == "diff" || key == "patch" || value.rfind("--- ", 0) == 0 || value.rfind("@@", 0) == 0 ||
         value.rfind("diff --git", 0) == 0;
}

// Arguments that hold a kernel or a change to one. Anything multi-line counts too: a model names
// its tool's fields as it likes.
bool HoldsCode(std::string_view key, std::string_view value) {
  static constexpr std::array<std::string_view, 10> kCodeKeys = {"source", "code", "kernel", "content", "new_source",
                                                                 "kernel_source", "diff", "patch", "text", "program"};
  return std::find(kCodeKeys.begin(), kCodeKeys.end(), key) != kCodeKeys.end() ||
         value.find('\n') != std::string_view::npos;
}

std::string RenderToolCall(const llm::ChatToolCall& call) {
  std::string out = "Tool call " + (call.name.empty() ? std::string("(unnamed)") : call.name) + ":\n";
  const nlohmann::json arguments = nlohmann::json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
  if (!arguments.is_object()) return out + call.arguments + "\n";
  for (const auto& [key, value] : arguments.items()) {
    if (value.is_string() && HoldsCode(key, value.get_ref<const std::string&>())) {
      const std::string& text = value.get_ref<const std::string&>();
      out += "```" + std::string(LooksLikeDiff(key, text) ? "diff" : "") + "\n" + text +
             (text.empty() || text.back() != '\n' ? "\n" : "") + "```\n";
    } else {
      out += key + ": " + (value.is_string() ? value.get<std::string>() : value.dump()) + "\n";
    }
  }
  return out;
}

}  // namespace

ModelReply ReadModelReply(std::string_view content) {
  ModelReply reply;
  const std::string text(content);
  const std::string lower = Lower(text);
  std::size_t at = 0;
  // A closing tag before any opening one: the template opened the thinking in the prompt.
  const TagHit first_open = FindTag(lower, 0, false);
  const TagHit first_close = FindTag(lower, 0, true);
  if (first_close.at != std::string::npos && first_close.at < first_open.at) {
    AppendParagraph(reply.reasoning, std::string_view(text).substr(0, first_close.at));
    at = first_close.at + first_close.length;
  }
  while (at < text.size()) {
    const TagHit open = FindTag(lower, at, false);
    if (open.at == std::string::npos) {
      reply.answer += text.substr(at);
      break;
    }
    reply.answer += text.substr(at, open.at - at);
    const std::size_t inside = open.at + open.length;
    const TagHit close = FindTag(lower, inside, true, open.name);
    if (close.at == std::string::npos) {
      AppendParagraph(reply.reasoning, std::string_view(text).substr(inside));
      reply.thinking_unfinished = true;
      break;
    }
    AppendParagraph(reply.reasoning, std::string_view(text).substr(inside, close.at - inside));
    at = close.at + close.length;
  }
  // Text around a removed block keeps the reply's shape; only the edges are trimmed.
  const auto first = reply.answer.find_first_not_of(" \t\r\n");
  reply.answer = first == std::string::npos ? "" : reply.answer.substr(first);
  return reply;
}

ModelReply ReadModelReply(const llm::ChatOutcome& outcome) {
  ModelReply inline_reply = ReadModelReply(outcome.content);
  ModelReply reply;
  AppendParagraph(reply.reasoning, outcome.reasoning);
  AppendParagraph(reply.reasoning, inline_reply.reasoning);
  reply.answer = std::move(inline_reply.answer);
  reply.thinking_unfinished = inline_reply.thinking_unfinished;
  for (const llm::ChatToolCall& call : outcome.tool_calls) {
    if (!reply.answer.empty() && reply.answer.back() != '\n') reply.answer += "\n";
    reply.answer += RenderToolCall(call);
  }
  return reply;
}

}  // namespace kernelgym::roles
