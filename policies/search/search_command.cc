#include "policies/search/search_command.h"

#include <fstream>
#include <iomanip>
#include <iostream>
#include <chrono>
#include <memory>

#include "policies/common/model.h"
#include "policies/learned/ranker.h"

namespace kernelgym::search {

void AddSearchCommand(CLI::App& app, SearchCommand& c) {
  c.app = app.add_subcommand("search", "graph search over kernel versions (parallel chains, beam, UCB best-first)");
  CLI::App& s = *c.app;
  s.add_option("--task", c.task, "task id (not needed with --resume: the graph names it)");
  s.add_option("--backend", c.backend, "runner backend")->capture_default_str();
  s.add_option("--proposer", c.proposer, "where children come from: knobs, mutate, llm")->capture_default_str()
      ->check(CLI::IsMember(ProposerNames()));
  s.add_option("--algorithm", c.options.algorithm, "parallel, beam or ucb")->capture_default_str()
      ->check(CLI::IsMember(AlgorithmNames()));
  s.add_option("--max-evaluations", c.options.max_evaluations, "children evaluated in all (resumed runs included)")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  s.add_option("--time-budget-s", c.options.time_budget_s, "this run's wall clock")->capture_default_str();
  s.add_option("--concurrency", c.options.concurrency, "evaluations in flight")->capture_default_str()->check(CLI::Range(1, 256));
  s.add_option("--runs", c.options.runs, "parallel: independent chains")->capture_default_str()->check(CLI::Range(1, 256));
  s.add_option("--beam-width", c.options.beam_width, "beam: nodes kept per level")->capture_default_str()->check(CLI::Range(1, 256));
  s.add_option("--branches", c.options.branches, "beam: children per kept node")->capture_default_str()->check(CLI::Range(1, 256));
  s.add_option("--depth", c.options.depth, "beam: levels")->capture_default_str()->check(CLI::Range(1, 1000));
  s.add_option("--ucb-c", c.options.ucb_c, "ucb: exploration weight")->capture_default_str()->check(CLI::Range(0.0, 100.0));
  s.add_option("--seed", c.options.seed, "seeds the episode and the proposals")->capture_default_str();
  s.add_flag("!--no-submit", c.options.submit_best, "skip the final, stricter evaluation of the best node");
  s.add_flag("--record", c.options.record, "record every evaluation in the server's trajectory store");
  s.add_option("--graph", c.graph, "the graph file, saved after every evaluation (default search-<task>.json)");
  s.add_flag("--resume", c.resume, "continue the search saved in --graph");
  s.add_option("--report", c.report, "write the Markdown report (best path, graph, nodes) here at the end; - for stdout");
  policies::AddChatFlags(s, c.chat, /*required=*/false);
  policies::AddEnvFlags(s, c.env);
  s.add_option("--prompts", c.prompts, "llm: the role prompt files' folder");
  s.add_option("--strategies", c.strategies, "llm: the folder of strategy lists (<backend>.md)");
  s.add_option("--cost-model", c.cost_model,
               "knobs: evaluate the template's settings in the order this cost model ranks them (`kernelgym train "
               "cost-model`)");
}

int RunSearchCommand(SearchCommand& c) {
  std::string error;
  SearchGraph graph;
  if (c.graph.empty()) {
    if (c.task.empty()) {
      std::cerr << "kernelgym search: --task is needed (or --resume --graph FILE)\n";
      return 2;
    }
    std::string name = c.task;
    std::replace(name.begin(), name.end(), '/', '_');
    c.graph = "search-" + name + ".json";
  }
  if (c.resume) {
    std::optional<SearchGraph> loaded = SearchGraph::Load(c.graph, error);
    if (!loaded) {
      std::cerr << "kernelgym search: --resume: " << error << "\n";
      return 2;
    }
    graph = std::move(*loaded);
    if (!c.task.empty() && c.task != graph.task()) {
      std::cerr << "kernelgym search: " << c.graph << " is a search on " << graph.task() << ", not " << c.task << "\n";
      return 2;
    }
    c.task = graph.task();
    c.backend = graph.backend();
    c.proposer = graph.settings().value("proposer", c.proposer);
    c.options.algorithm = graph.settings().value("algorithm", c.options.algorithm);
    if (c.cost_model.empty()) c.cost_model = graph.settings().value("cost_model", "");
    std::cerr << "kernelgym search: resuming " << c.graph << " (" << graph.size() << " nodes)\n";
  } else {
    if (c.task.empty()) {
      std::cerr << "kernelgym search: --task is needed\n";
      return 2;
    }
    if (std::filesystem::exists(c.graph)) {
      std::cerr << "kernelgym search: " << c.graph << " exists: --resume continues it, or choose another --graph\n";
      return 2;
    }
    graph = SearchGraph(c.task, c.backend,
                        {{"proposer", c.proposer}, {"algorithm", c.options.algorithm}, {"seed", c.options.seed},
                         {"runs", c.options.runs}, {"beam_width", c.options.beam_width},
                         {"branches", c.options.branches}, {"depth", c.options.depth}, {"ucb_c", c.options.ucb_c},
                         {"model", c.chat.model}, {"cost_model", c.cost_model}});
  }

  if (!c.cost_model.empty() && c.proposer != "knobs") {
    std::cerr << "kernelgym search: --cost-model ranks knob settings: use it with --proposer knobs\n";
    return 2;
  }
  policies::Model model;
  if (!policies::LoadModel(c.chat, c.prompts, /*repairs=*/1, model, error)) {
    std::cerr << "kernelgym search: " << error << "\n";
    return 2;
  }
  if (const std::string why = policies::CheckModelEndpoint(model); !why.empty()) {
    std::cerr << "kernelgym search: " << why << "\n";
    return policies::kExitModelUnusable;
  }
  if (model.chat) {
    // The time budget holds inside a chat call too.
    model.chat->SetDeadline(std::chrono::steady_clock::now() +
                            std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(c.options.time_budget_s)));
  }

  if (!c.env.record_dir.empty()) c.options.record = true;  // a store was asked for: fill it
  std::unique_ptr<policies::LocalServer> server;
  const std::string endpoint = policies::ConnectOrStart(c.env, c.backend, c.options.record, server, error);
  if (endpoint.empty()) {
    std::cerr << "kernelgym search: " << error << "\n";
    return 1;
  }
  try {
    client::Client env(client::ClientOptions{.endpoint = endpoint, .request_timeout_s = c.env.request_timeout_s});
    ProposerContext context;
    context.task = TaskForBackend(env.GetTask(c.task), c.backend);  // this backend's knob template
    context.backend = c.backend;
    context.assistant = model.assistant.get();
    context.strategies_dir = c.strategies.empty() ? DefaultStrategiesDir() : std::filesystem::path(c.strategies);
    std::shared_ptr<learned::KnobRanker> ranker;
    if (!c.cost_model.empty()) {
      ranker = learned::KnobRanker::Load(c.cost_model, context.task, error);
      if (!ranker) {
        std::cerr << "kernelgym search: --cost-model: " << error << "\n";
        return 2;
      }
      context.score_knobs = [ranker](const std::vector<std::map<std::string, protocol::KnobValue>>& settings) {
        return ranker->Score(settings);
      };
    }
    std::unique_ptr<Proposer> proposer = CreateProposer(c.proposer, context, error);
    if (!proposer) {
      std::cerr << "kernelgym search: " << error << "\n";
      return 2;
    }
    std::string model_failure;
    {
      Searcher searcher(env, *proposer, graph, c.graph, c.options, std::cerr);
      searcher.Run();
      if (model.assistant && (model.assistant->endpoint_failed() || !model.assistant->any_usable_reply())) {
        model_failure = searcher.stop_reason().empty() ? "the model never gave a usable proposal" : searcher.stop_reason();
      }
    }
    const auto best = graph.Best();
    const SearchNode& root = graph.node(0);
    std::cout << std::fixed << std::setprecision(2) << "search on " << graph.task() << " (" << c.proposer << ", "
              << c.options.algorithm << "): " << graph.evaluations() << " evaluations; starter "
              << (root.ok() ? root.speedup : 0.0) << "x";
    if (best) {
      std::cout << ", best node " << *best << " " << graph.node(*best).speedup << "x the reference";
      if (root.ok() && root.speedup > 0) std::cout << " (" << graph.node(*best).speedup / root.speedup << "x the starter)";
      if (!graph.final_evaluation().empty())
        std::cout << "; final evaluation " << graph.final_evaluation().value("status", "") << " "
                  << graph.final_evaluation().value("speedup", 0.0) << "x";
    }
    std::cout << "\ngraph: " << c.graph << "\n";
    if (model.chat) std::cout << policies::DescribeChat(model.chat->totals()) << "\n";
    if (!c.report.empty()) {
      const std::string text = RenderSearchReport(graph);
      if (c.report == "-") std::cout << text;
      else std::ofstream(c.report) << text;
    }
    if (!model_failure.empty()) {
      std::cerr << "kernelgym search: " << model_failure << "\n";
      return policies::kExitModelUnusable;
    }
    return best ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "kernelgym search: " << e.what() << " (the graph so far is in " << c.graph << ")\n";
    return 1;
  }
}

}  // namespace kernelgym::search
