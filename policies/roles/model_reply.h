// The one reader of what a model said, used by every role before its parser (reply_parsers.h).
//
// The same model's reply reaches us in different shapes depending on how it is served: a thinking
// model's reasoning arrives in `reasoning_content` or `reasoning` when the server runs a reasoning
// parser, and inline as <think>...</think> when it does not; a tool-calling model puts its answer
// in tool-call arguments with no content at all. Decisions must come from the final answer only (a
// draft "DECISION: STOP" or diff inside the thinking is not the answer), and a record must look
// the same however the server delivered it. ReadModelReply makes one shape of all of them.
#pragma once

#include <string>
#include <string_view>

#include "policies/llm/chat_client.h"

namespace kernelgym::roles {

struct ModelReply {
  std::string answer;     // what the parsers read: the content without its thinking, tool calls rendered as text
  std::string reasoning;  // the thinking, from the reasoning field and/or inline tags, in order
  // The reply ended inside an inline <think> (a reply cut while the model was still thinking).
  bool thinking_unfinished = false;
};

// Inline thinking is <think>, <thinking> or <reasoning> (any case). A closing tag with no opening
// one (chat templates that put the opening tag in the prompt) makes everything before it thinking.
// Each tool call becomes "Tool call NAME:" followed by its arguments: string arguments that hold
// code (source, code, kernel, content, diff, patch, ...) as a fenced block (```diff for a diff),
// other arguments as "key: value" lines, arguments that are not JSON verbatim.
ModelReply ReadModelReply(const llm::ChatOutcome& outcome);
ModelReply ReadModelReply(std::string_view content);  // inline thinking only (a plain text reply)

}  // namespace kernelgym::roles
