// `kernelgym search`: flags onto SearchOptions, a graph file to save to and resume from, a report.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "policies/common/command_flags.h"
#include "policies/search/search.h"

namespace kernelgym::search {

struct SearchCommand {
  std::string task, backend = "cpu", proposer = "knobs";
  SearchOptions options;
  std::string graph;   // the graph file (default search-<task>.json)
  bool resume = false;
  std::string report;  // Markdown report written at the end ("" : none; "-": stdout)
  llm::ChatOptions chat;
  policies::EnvFlags env;
  std::string prompts, strategies;
  std::string cost_model;  // knobs: rank the template's settings with this model (`kernelgym train cost-model`)
  CLI::App* app = nullptr;
};

void AddSearchCommand(CLI::App& app, SearchCommand& command);
int RunSearchCommand(SearchCommand& command);

}  // namespace kernelgym::search
