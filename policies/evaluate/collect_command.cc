// `kernelgym collect`: a policy over a suite with every step recorded, then the dataset folder:
//   store/              the trajectory store (docs/dataset.md), as the server wrote it
//   transitions.jsonl   one row per distinct kernel (duplicates of an earlier kernel left out)
//   sft.jsonl           improving steps as chat examples; chat.jsonl: the model's exchanges
//   report.json/.md     the policy's evaluation report on the suite
//   card.json/.md       what is in it and where it came from
#include <unistd.h>

#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

#include "datasets/trajectory/export.h"
#include "datasets/trajectory/reader.h"
#include "datasets/trajectory/record_schema.h"
#include "datasets/trajectory/store_stats.h"
#include "policies/evaluate/evaluate_command.h"
#include "policies/common/model.h"

namespace kernelgym::evaluate {
namespace {

using nlohmann::json;

// One export of the store into `out`; false (with the reason on stderr) when the store cannot be
// read or the file cannot be written.
bool Export(const std::filesystem::path& store, ExportFormat format, const std::filesystem::path& out, bool dedup,
            ExportSummary& summary) {
  TrajectoryReader reader(store);
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  if (!reader.ok() || !file) {
    std::cerr << "kernelgym collect: cannot export " << store.string() << " to " << out.string() << ": "
              << (reader.ok() ? "cannot write the file" : reader.error()) << "\n";
    return false;
  }
  ExportOptions options;
  options.dedup = dedup;
  summary = ExportRecords(reader, format, file, options);
  return static_cast<bool>(file.flush());
}

json Card(const CollectCommand& c, const Report& report, const std::filesystem::path& store, uint64_t transitions_rows,
          uint64_t duplicates, uint64_t sft_rows, uint64_t chat_rows) {
  TrajectoryReader reader(store);
  const StoreStats stats = ComputeStoreStats(reader);
  std::set<std::string> runners, versions;
  TrajectoryReader again(store);
  for (json record; again.Next(record);) {
    if (record.contains(record::kRunner)) runners.insert(record[record::kRunner].dump());
    if (record.contains(record::kVersions)) versions.insert(record[record::kVersions].dump());
  }
  json machines = json::array(), version_list = json::array();
  for (const std::string& r : runners) machines.push_back(json::parse(r));
  for (const std::string& v : versions) version_list.push_back(json::parse(v));
  return {{"dataset", "kernelgym trajectories"},
          {"policy", report.policy},
          {"suite", c.run.suite},
          {"backend", c.run.backend},
          {"episodes_per_task", c.run.episodes},
          {"budget", c.run.budget},
          {"seed", c.run.seed},
          {"model", c.chat.model},
          {"created", report.created},
          {"counts",
           {{"tasks", stats.tasks.size()},
            {"episodes", stats.episodes},
            {"records", stats.records},
            {"resets", stats.resets},
            {"transitions", stats.transitions},
            {"distinct_kernels", transitions_rows},
            {"duplicate_kernels_left_out", duplicates},
            {"sft_examples", sft_rows},
            {"chat_examples", chat_rows},
            {"statuses", stats.statuses}}},
          {"report_metrics",
           {{"fast_p", report.metrics.fast_p},
            {"geomean_correct", report.metrics.geomean_correct},
            {"correct", report.metrics.correct},
            {"tasks", report.metrics.tasks}}},
          {"provenance", {{"server", report.provenance}, {"runners", machines}, {"versions", version_list}}},
          {"files",
           {{"store", "store/"},
            {"transitions", "transitions.jsonl"},
            {"sft", "sft.jsonl"},
            {"chat", "chat.jsonl"},
            {"report", "report.json"}}}};
}

std::string CardMarkdown(const json& card) {
  std::ostringstream out;
  const json& n = card["counts"];
  out << "# Dataset card\n\n"
      << "kernelgym trajectories of the policy `" << card["policy"].get<std::string>() << "` on the `"
      << card["suite"].get<std::string>() << "` suite (" << card["backend"].get<std::string>() << " backend), "
      << card["episodes_per_task"] << " episode(s) per task, budget " << card["budget"] << ", seed " << card["seed"]
      << ", created " << card["created"].get<std::string>() << ".\n\n"
      << "| what | count |\n|---|---|\n"
      << "| tasks | " << n["tasks"] << " |\n| episodes | " << n["episodes"] << " |\n| transitions | "
      << n["transitions"] << " |\n| distinct kernels (transitions.jsonl) | " << n["distinct_kernels"]
      << " |\n| duplicate kernels left out | " << n["duplicate_kernels_left_out"] << " |\n| SFT examples (sft.jsonl) | "
      << n["sft_examples"] << " |\n| chat examples (chat.jsonl) | " << n["chat_examples"] << " |\n\n"
      << "Statuses of the recorded evaluations: ";
  bool first = true;
  for (const auto& [status, count] : n["statuses"].items()) {
    out << (first ? "" : ", ") << (status.empty() ? "(none)" : status) << " " << count;
    first = false;
  }
  out << ".\n\n## Files\n\n- `store/`: the trajectory store (docs/dataset.md), one JSON record per reset and step\n"
         "- `transitions.jsonl`: one row per distinct kernel, `pandas.read_json(path, lines=True)`\n"
         "- `sft.jsonl`, `chat.jsonl`: chat examples (improving steps; the model's own exchanges)\n"
         "- `report.json`, `report.md`: the policy's evaluation on the suite\n\n"
      << "## Provenance\n\n```json\n" << card["provenance"].dump(2) << "\n```\n";
  return out.str();
}

}  // namespace

void AddCollectCommand(CLI::App& app, CollectCommand& c) {
  c.app = app.add_subcommand("collect", "run a policy on a suite with recording; write a dataset folder with its card");
  CLI::App& a = *c.app;
  RegisterBuiltinPolicies();
  a.add_option("--policy", c.policy, PolicyRegistry::Global().NameList())->capture_default_str();
  AddSuiteRunFlags(a, c.run);
  a.add_option("--out", c.out, "the dataset folder (must not exist yet)")->required();
  a.add_option("--local-runners", c.env.local_runners, "runners of the server collect starts")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  policies::AddChatFlags(a, c.chat, /*required=*/false);
  a.add_option("--prompts", c.prompts, "agent: the role prompt files' folder");
}

int RunCollectCommand(CollectCommand& c) {
  std::string error;
  const std::filesystem::path out = c.out, store = out / "store";
  if (std::filesystem::exists(out)) {
    std::cerr << "kernelgym collect: " << out.string() << " exists; collect writes a new folder\n";
    return 2;
  }
  policies::Model model;
  if (!policies::LoadModel(c.chat, c.prompts, /*repairs=*/1, model, error)) {
    std::cerr << "kernelgym collect: " << error << "\n";
    return 2;
  }
  if (const std::string why = policies::CheckModelEndpoint(model); !why.empty()) {
    std::cerr << "kernelgym collect: " << why << "\n";
    return policies::kExitModelUnusable;
  }
  c.run.assistant = model.assistant.get();
  if (!PoliciesReady({c.policy}, c.run, error)) {
    std::cerr << "kernelgym collect: " << error << "\n";
    return 2;
  }
  std::unique_ptr<EpisodePolicy> policy = PolicyRegistry::Global().Create(c.policy, error);
  std::filesystem::create_directories(out);
  c.run.record = true;
  c.run.assistant = model.assistant.get();
  c.run.model = c.chat.model;
  c.env.record_dir = std::filesystem::absolute(store).string();
  Report report;
  {
    std::unique_ptr<policies::LocalServer> server;
    const std::string endpoint = policies::ConnectOrStart(c.env, c.run.backend, c.run.record, server, error);
    if (endpoint.empty()) {
      std::cerr << "kernelgym collect: " << error << "\n";
      return 1;
    }
    try {
      client::Client env(client::ClientOptions{.endpoint = endpoint, .request_timeout_s = c.env.request_timeout_s});
      std::ostringstream episode_log;
      report = RunSuite(env, *policy, c.run, &std::cerr, isatty(STDERR_FILENO) != 0, episode_log);
      if (report.outcomes.empty()) {
        std::cerr << "kernelgym collect: no task of suite '" << c.run.suite << "' has a " << c.run.backend
                  << " version" << (c.run.tasks.empty() ? "" : " among the --task ones") << "\n";
        return 2;
      }
    } catch (const std::exception& e) {
      std::cerr << "kernelgym collect: " << e.what() << "\n";
      return 1;
    }
  }  // the server stops here: its recorder has flushed every record
  std::ofstream(out / "report.json") << ReportToJson(report).dump(2) << "\n";
  std::ofstream(out / "report.md") << RenderMarkdown(report);
  ExportSummary transitions, sft, chat_rows;
  if (!Export(store, ExportFormat::kTransitions, out / "transitions.jsonl", /*dedup=*/true, transitions) ||
      !Export(store, ExportFormat::kSft, out / "sft.jsonl", false, sft) ||
      !Export(store, ExportFormat::kChat, out / "chat.jsonl", false, chat_rows))
    return 1;
  const json card = Card(c, report, store, transitions.rows, transitions.duplicates, sft.rows, chat_rows.rows);
  std::ofstream(out / "card.json") << card.dump(2) << "\n";
  std::ofstream(out / "card.md") << CardMarkdown(card);
  std::cout << "collected " << card["counts"]["transitions"] << " transitions (" << transitions.rows
            << " distinct kernels, " << transitions.duplicates << " duplicates left out) from " << card["counts"]["episodes"] << " episodes into "
            << out.string() << " (card.md)\n";
  return 0;
}

}  // namespace kernelgym::evaluate
