#include "datasets/trajectory/export.h"

#include <unordered_set>

#include "core/backend_info.h"
#include "datasets/trajectory/record_access.h"
#include "datasets/trajectory/record_schema.h"

namespace kernelgym {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using record::Field;

bool IsKind(const json& record, const char* kind) {
  const json& k = Field(record, record::kKind);
  return k.is_string() && k.get_ref<const std::string&>() == kind;
}

const std::string* String(const json& value) {
  return value.is_string() ? &value.get_ref<const std::string&>() : nullptr;
}

// Text followed by exactly one newline when it does not already end in one.
std::string WithNewline(const std::string& text) {
  if (!text.empty() && text.back() == '\n') return text;
  return text + "\n";
}

std::string_view FenceLanguage(std::string_view backend) { return BackendInfoOr(backend).language; }

}  // namespace

std::optional<ExportFormat> ParseExportFormat(std::string_view name) {
  if (name == "transitions") return ExportFormat::kTransitions;
  if (name == "sft") return ExportFormat::kSft;
  if (name == "chat") return ExportFormat::kChat;
  return std::nullopt;
}

std::string_view ExportFormatName(ExportFormat format) {
  switch (format) {
    case ExportFormat::kTransitions:
      return "transitions";
    case ExportFormat::kSft:
      return "sft";
    case ExportFormat::kChat:
      return "chat";
  }
  return "?";
}

std::optional<ordered_json> TransitionRow(const json& record) {
  if (!IsKind(record, record::kKindTransition)) return std::nullopt;
  const json& observation = Field(record, record::kObservation);
  const json& action = Field(record, record::kAction);
  ordered_json row;
  row["env"] = Field(record, record::kEnv);
  row["episode"] = Field(record, record::kEpisode);
  row["task"] = Field(record, record::kTask);
  row["backend"] = Field(record, record::kBackend);
  row["seed"] = Field(record, record::kSeed);
  row["step"] = Field(record, record::kStep);
  row["action_kind"] = Field(action, record::action::kKind);
  row["action"] =
      action.is_null() ? ordered_json() : ordered_json(action.dump(-1, ' ', false, json::error_handler_t::replace));
  row["status"] = Field(observation, record::obs::kStatus);
  row["speedup"] = Field(observation, record::obs::kSpeedup);
  row["best_speedup"] = Field(observation, record::obs::kBestSpeedup);
  row["reward"] = Field(record, record::kReward);
  row["terminated"] = Field(record, record::kTerminated);
  row["truncated"] = Field(record, record::kTruncated);
  row["reused"] = Field(observation, record::obs::kReused);
  const json& seconds = Field(Field(observation, record::obs::kReport), record::obs::kReportSeconds);
  row["eval_seconds"] = seconds.is_number() ? seconds : json();
  row["prompt"] = Field(record, record::kPrompt);
  row["source"] = Field(observation, record::obs::kSource);
  return row;
}

std::optional<std::string> RenderActionText(const json& action, std::string_view backend) {
  const std::string* kind = String(Field(action, record::action::kKind));
  if (!kind) return std::nullopt;
  if (*kind == record::action::kReplace) {
    const std::string* source = String(Field(action, record::action::kSource));
    if (!source) return std::nullopt;
    return "```" + std::string(FenceLanguage(backend)) + "\n" + WithNewline(*source) + "```";
  }
  if (*kind == record::action::kEdit) {
    const json& edits = Field(action, record::action::kEdits);
    if (!edits.is_array() || edits.empty()) return std::nullopt;
    std::string text;
    for (const json& edit : edits) {
      const std::string* search = String(Field(edit, record::action::kSearch));
      const std::string* replace = String(Field(edit, record::action::kReplaceText));
      if (!search || !replace) return std::nullopt;
      if (!text.empty()) text += "\n";
      text += "<<<<<<< SEARCH\n" + WithNewline(*search) + "=======\n" +
              (replace->empty() ? std::string() : WithNewline(*replace)) + ">>>>>>> REPLACE\n";
    }
    text.pop_back();  // no newline after the last marker, like the other renderings
    return text;
  }
  if (*kind == record::action::kPatch) {
    const std::string* diff = String(Field(action, record::action::kDiff));
    if (!diff) return std::nullopt;
    return "```diff\n" + WithNewline(*diff) + "```";
  }
  if (*kind == record::action::kKnobs) {
    if (!Field(action, record::action::kValues).is_object()) return std::nullopt;
    return action.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  if (*kind == record::action::kRevert) {
    if (!Field(action, record::action::kToStep).is_number_integer()) return std::nullopt;
    return action.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  if (*kind == record::action::kSubmit) return std::string("SUBMIT");
  return std::nullopt;
}

std::optional<ordered_json> SftExample(const json& record) {
  if (!IsKind(record, record::kKindTransition)) return std::nullopt;
  const json& observation = Field(record, record::kObservation);
  const std::string* status = String(Field(observation, record::obs::kStatus));
  if (!status || *status != record::obs::kStatusOk) return std::nullopt;
  const json& reward = Field(record, record::kReward);
  if (!reward.is_number() || !(reward.get<double>() > 0)) return std::nullopt;
  const std::string* prompt = String(Field(record, record::kPrompt));
  if (!prompt || prompt->empty()) return std::nullopt;
  const std::string* backend = String(Field(record, record::kBackend));
  std::optional<std::string> answer =
      RenderActionText(Field(record, record::kAction), backend ? *backend : std::string_view());
  if (!answer) return std::nullopt;

  ordered_json example;
  example["messages"] = ordered_json::array({ordered_json{{"role", "user"}, {"content", *prompt}},
                                             ordered_json{{"role", "assistant"}, {"content", *answer}}});
  example["task"] = Field(record, record::kTask);
  example["reward"] = reward;
  example["speedup"] = Field(observation, record::obs::kSpeedup);
  return example;
}

std::vector<ordered_json> ChatExamples(const json& record) {
  std::vector<ordered_json> examples;
  if (!IsKind(record, record::kKindTransition)) return examples;
  const json& exchanges = Field(Field(record, record::kMeta), record::meta::kExchanges);
  if (!exchanges.is_array()) return examples;
  const json& observation = Field(record, record::kObservation);
  for (const json& exchange : exchanges) {
    const std::string* status = String(Field(exchange, record::meta::kStatus));
    const std::string* completion = String(Field(exchange, record::meta::kCompletion));
    const json& sent = Field(exchange, record::meta::kMessages);
    if (!status || *status != "ok" || !completion || !sent.is_array() || exchange.contains("parse_error")) continue;
    ordered_json messages = ordered_json::array();
    bool well_formed = true;
    for (const json& m : sent) {
      const std::string* role = String(Field(m, "role"));
      const std::string* content = String(Field(m, "content"));
      if (!role || !content) well_formed = false;
      else messages.push_back(ordered_json{{"role", *role}, {"content", *content}});
    }
    if (!well_formed) continue;
    messages.push_back(ordered_json{{"role", "assistant"}, {"content", *completion}});
    ordered_json example;
    example["messages"] = std::move(messages);
    example["role"] = Field(exchange, record::meta::kRole);
    example["task"] = Field(record, record::kTask);
    example["backend"] = Field(record, record::kBackend);
    example["episode"] = Field(record, record::kEpisode);
    example["step"] = Field(record, record::kStep);
    const json& produced = Field(exchange, record::meta::kProducedStep);
    if (produced.is_boolean() && !produced.get<bool>()) {
      // It rode with this step but did not lead to it: it earns none of its outcome.
      example["reward"] = nullptr;
      example["status"] = "no_step";
      example["speedup"] = nullptr;
    } else {
      example["reward"] = Field(record, record::kReward);
      example["status"] = Field(observation, record::obs::kStatus);
      example["speedup"] = Field(observation, record::obs::kSpeedup);
    }
    if (const std::string* reasoning = String(Field(exchange, record::meta::kReasoning))) example["reasoning"] = *reasoning;
    examples.push_back(std::move(example));
  }
  return examples;
}

ExportSummary ExportRecords(TrajectoryReader& reader, ExportFormat format, std::ostream& out,
                            const ExportOptions& options) {
  ExportSummary summary;
  std::unordered_set<std::string> seen;  // task + backend + source of every kernel exported
  json record;
  while (reader.Next(record)) {
    ++summary.records;
    if (options.dedup && IsKind(record, record::kKindTransition)) {
      const std::string* task = String(Field(record, record::kTask));
      const std::string* backend = String(Field(record, record::kBackend));
      const std::string* source = String(Field(Field(record, record::kObservation), record::obs::kSource));
      if (task && backend && source && !seen.insert(*task + '\0' + *backend + '\0' + *source).second) {
        ++summary.duplicates;
        continue;
      }
    }
    std::vector<ordered_json> rows;
    if (format == ExportFormat::kChat) rows = ChatExamples(record);
    else if (auto row = format == ExportFormat::kTransitions ? TransitionRow(record) : SftExample(record)) rows.push_back(*row);
    for (const ordered_json& row : rows) {
      // Invalid UTF-8 in a stored string is replaced rather than failing the whole export.
      out << row.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
      ++summary.rows;
    }
  }
  return summary;
}

}  // namespace kernelgym
