// A role's prompt as a file: a system part and a user part with {{variables}}, editable without
// recompiling (docs/agent.md, "Changing a role's prompt").
//
// File format:
//   anything before the first marker is a note for whoever edits the file (not sent)
//   --- system ---
//   the system message
//   --- user ---
//   the user message
// In both parts:
//   {{name}}                  the variable's text
//   {{#name}} ... {{/name}}   the enclosed text only when the variable is set and not empty
//   {{^name}} ... {{/name}}   the enclosed text only when it is unset or empty
// A name the caller does not provide is an error when the template is loaded against the role's
// variable list (a typo in an edited file is caught at start-up, not sent to a model).
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kernelgym::roles {

using Variables = std::map<std::string, std::string>;

class PromptTemplate {
 public:
  // Parses `text`; nullopt with `error` set when a marker is missing, a section is not closed, or
  // a placeholder names a variable outside `known` (the error names the file and the line).
  static std::optional<PromptTemplate> Parse(const std::string& text, const std::set<std::string>& known,
                                             const std::string& where, std::string& error);
  static std::optional<PromptTemplate> Load(const std::filesystem::path& file, const std::set<std::string>& known,
                                            std::string& error);

  std::string RenderSystem(const Variables& variables) const;
  std::string RenderUser(const Variables& variables) const;
  // The variables the template uses (for docs and tests).
  const std::set<std::string>& used() const { return used_; }

 private:
  std::string system_, user_;
  std::set<std::string> used_;
};

// Renders one part: exposed for tests.
std::string RenderTemplateText(const std::string& text, const Variables& variables);

}  // namespace kernelgym::roles
