#include "policies/evaluate/evaluate_command.h"

#include <unistd.h>

#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "policies/common/model.h"

namespace kernelgym::evaluate {
namespace {

bool WriteText(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

std::string FileName(std::string policy) {
  for (char& ch : policy)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') ch = '_';
  return policy;
}

}  // namespace

void AddEvaluateCommand(CLI::App& app, EvaluateCommand& c) {
  c.app = app.add_subcommand("evaluate", "run policies on a suite; write reports (Markdown, JSON), a comparison and a plot");
  CLI::App& a = *c.app;
  RegisterBuiltinPolicies();
  a.add_option("--policy", c.policies, "a policy (repeatable): " + PolicyRegistry::Global().NameList());
  AddSuiteRunFlags(a, c.run);
  a.add_option("--out", c.out, "the folder for <policy>.json/.md, comparison.md and speedups.svg")->capture_default_str();
  a.add_option("--compare", c.compare, "report JSON files to compare (no policy is run)");
  a.add_flag("--record", c.run.record, "record every episode in the server's trajectory store (implied by --record-dir)");
  policies::AddChatFlags(a, c.chat, /*required=*/false);
  policies::AddEnvFlags(a, c.env);
  a.add_option("--prompts", c.prompts, "agent: the role prompt files' folder");
}

int RunEvaluateCommand(EvaluateCommand& c) {
  std::string error;
  std::vector<Report> reports;
  std::filesystem::create_directories(c.out);
  if (!c.compare.empty()) {
    for (const std::string& file : c.compare) {
      std::ifstream in(file);
      const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      std::optional<Report> report = j.is_discarded() ? std::nullopt : ReportFromJson(j, error);
      if (!report) {
        std::cerr << "kernelgym evaluate: " << file << ": " << (j.is_discarded() ? "not JSON" : error) << "\n";
        return 2;
      }
      reports.push_back(std::move(*report));
    }
  } else {
    if (c.policies.empty()) {
      std::cerr << "kernelgym evaluate: give --policy (one or more) or --compare REPORT.json...\n";
      return 2;
    }
    policies::Model model;
    if (!policies::LoadModel(c.chat, c.prompts, /*repairs=*/1, model, error)) {
      std::cerr << "kernelgym evaluate: " << error << "\n";
      return 2;
    }
    if (const std::string why = policies::CheckModelEndpoint(model); !why.empty()) {
      std::cerr << "kernelgym evaluate: " << why << "\n";
      return policies::kExitModelUnusable;
    }
    c.run.assistant = model.assistant.get();
    if (!PoliciesReady(c.policies, c.run, error)) {
      std::cerr << "kernelgym evaluate: " << error << "\n";
      return 2;
    }
    std::vector<std::unique_ptr<EpisodePolicy>> policies;
    for (const std::string& name : c.policies) policies.push_back(PolicyRegistry::Global().Create(name, error));
    c.run.record = c.run.record || !c.env.record_dir.empty();  // --record-dir: keep every episode in that store
    c.run.assistant = model.assistant.get();
    c.run.model = c.chat.model;
    std::unique_ptr<policies::LocalServer> server;
    const std::string endpoint = policies::ConnectOrStart(c.env, c.run.backend, c.run.record, server, error);
    if (endpoint.empty()) {
      std::cerr << "kernelgym evaluate: " << error << "\n";
      return 1;
    }
    try {
      client::Client env(client::ClientOptions{.endpoint = endpoint, .request_timeout_s = c.env.request_timeout_s});
      std::ostringstream episode_log;  // the policies' own lines: kept out of the progress bar's way
      for (auto& policy : policies) {
        Report report = RunSuite(env, *policy, c.run, &std::cerr, isatty(STDERR_FILENO) != 0, episode_log);
        if (report.outcomes.empty()) {
          std::cerr << "kernelgym evaluate: no task of suite '" << c.run.suite << "' has a " << c.run.backend
                    << " version" << (c.run.tasks.empty() ? "" : " among the --task ones") << "\n";
          return 2;
        }
        // The chat flags' prices (--price-in/--price-out) also price the report.
        report.metrics = ComputeMetrics(report.outcomes, Prices{c.chat.budget.price_in_per_million,
                                                                c.chat.budget.price_out_per_million});
        const std::filesystem::path base = std::filesystem::path(c.out) / FileName(report.policy);
        WriteText(base.string() + ".json", ReportToJson(report).dump(2) + "\n");
        WriteText(base.string() + ".md", RenderMarkdown(report));
        std::cout << std::fixed << std::setprecision(2) << report.policy << " on " << report.suite << ": fast_1.0 "
                  << 100 * report.metrics.fast_p["fast_1.0"] << "%, correct " << report.metrics.correct << "/"
                  << report.metrics.tasks << ", geomean " << report.metrics.geomean_correct
                  << "x over the correct tasks -> " << base.string() << ".md\n";
        reports.push_back(std::move(report));
      }
    } catch (const std::exception& e) {
      std::cerr << "kernelgym evaluate: " << e.what() << "\n";
      return 1;
    }
  }
  const std::filesystem::path comparison = std::filesystem::path(c.out) / "comparison.md";
  const std::filesystem::path plot = std::filesystem::path(c.out) / "speedups.svg";
  WriteText(comparison, RenderComparisonMarkdown(reports) + "\n![speedups](speedups.svg)\n");
  WriteText(plot, RenderSpeedupSvg(reports));
  std::cout << "comparison: " << comparison.string() << ", plot: " << plot.string() << "\n";
  return 0;
}

}  // namespace kernelgym::evaluate
