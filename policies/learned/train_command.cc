#include "policies/learned/train_command.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>

#include "policies/learned/plot.h"

namespace kernelgym::learned {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// A server (found or started), a client, the measurement store and the evaluator over them.
struct Session {
  std::unique_ptr<policies::LocalServer> server;
  std::unique_ptr<client::Client> client;
  std::unique_ptr<MeasurementStore> store;
  std::unique_ptr<Evaluator> evaluator;
};

bool OpenSession(TrainCommand& c, const fs::path& measurements, Session& s, std::string& error) {
  bool record = !c.env.record_dir.empty();
  const std::string endpoint = policies::ConnectOrStart(c.env, c.backend, record, s.server, error);
  if (endpoint.empty()) return false;
  s.client = std::make_unique<client::Client>(
      client::ClientOptions{.endpoint = endpoint, .request_timeout_s = c.env.request_timeout_s});
  s.store = MeasurementStore::Open(measurements, error);
  if (!s.store) return false;
  s.evaluator = std::make_unique<Evaluator>(*s.client, *s.store,
                                            EvaluatorOptions{c.backend, c.envs_per_task, record});
  return true;
}

// The selection's tasks that have a knob template for the backend: --task as given (each must
// have one), else every templated task of the --suite's; `holdout` ones left out.
std::vector<std::string> TrainingTasks(Evaluator& evaluator, client::Client& client, const TrainCommand& c) {
  const std::set<std::string> holdout(c.selection.holdout.begin(), c.selection.holdout.end());
  std::vector<std::string> out;
  if (!c.selection.tasks.empty()) {
    for (const std::string& t : c.selection.tasks)
      if (!holdout.count(t)) out.push_back(t);
    return out;
  }
  for (const std::string& suite : c.selection.suites)
    for (const protocol::TaskSummary& summary : client.ListTasks(suite)) {
      const std::string& id = summary.id;
      const std::vector<std::string>& backends = summary.backends;
      if (holdout.count(id) || std::find(backends.begin(), backends.end(), c.backend) == backends.end()) continue;
      if (!KnobSpace::FromTask(evaluator.Task(id)).empty()) out.push_back(id);
    }
  return out;
}

std::vector<TaskInfo> LoadInfos(Evaluator& evaluator, const FeatureLayout& layout, const std::vector<std::string>& ids,
                                bool with_starter) {
  std::vector<TaskInfo> infos;
  for (const std::string& id : ids) infos.push_back(LoadTaskInfo(evaluator, layout, id, with_starter));
  return infos;
}

std::vector<const TaskInfo*> Pointers(const std::vector<TaskInfo>& infos) {
  std::vector<const TaskInfo*> out;
  for (const TaskInfo& t : infos) out.push_back(&t);
  return out;
}

std::vector<protocol::TaskInfo> TaskInfos(Evaluator& evaluator, const std::vector<std::string>& ids) {
  std::vector<protocol::TaskInfo> out;
  for (const std::string& id : ids) out.push_back(evaluator.Task(id));
  return out;
}

void WriteText(const fs::path& file, const std::string& text) {
  if (file.has_parent_path()) fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

json Provenance(const TrainCommand& c, const std::string& how, const std::vector<std::string>& tasks,
                client::Client& client) {
  return {{"trained_by", "kernelgym train " + how}, {"tasks", tasks},      {"holdout", c.selection.holdout},
          {"backend", c.backend},                    {"seed", c.model.seed}, {"server", client.Hello().server},
          {"knob_names", c.knob_names}};
}

// The held-out evaluation of `policy`, written to <out>/heldout.json and .md and summarized.
void RunHeldout(PolicyModel& policy, Session& s, const TrainCommand& c, const fs::path& out) {
  if (c.selection.holdout.empty()) return;
  const std::vector<TaskInfo> infos = LoadInfos(*s.evaluator, policy.layout(), c.selection.holdout, true);
  const std::vector<HeldoutRow> rows = EvaluateHeldout(policy, *s.evaluator, *s.store, Pointers(infos), c.heldout);
  const json report = HeldoutToJson(rows, c.heldout);
  WriteText(out / "heldout.json", report.dump(2) + "\n");
  WriteText(out / "heldout.md", HeldoutToMarkdown(rows, c.heldout));
  const json& g = report["geomean"];
  std::cout << std::fixed << std::setprecision(2) << "held-out (" << rows.size() << " tasks, k = " << c.heldout.steps
            << "), geomean speedup over the starter: defaults " << g["defaults_over_starter"].get<double>()
            << "x, random 1 " << g["random_first_over_starter"].get<double>() << "x / best-of-k "
            << g["random_best_over_starter"].get<double>() << "x, policy 1 " << g["greedy_first_over_starter"].get<double>()
            << "x / best-of-k " << g["greedy_best_over_starter"].get<double>() << "x, best known "
            << g["best_known_over_starter"].get<double>() << "x\n  " << (out / "heldout.md").string() << "\n";
}

void WriteTrainingPlot(const fs::path& file, const std::vector<IterationStats>& log) {
  Series first{"step-1 speedup / starter", {}}, best{"best-of-episode / starter", {}}, entropy{"entropy", {}};
  Series kl{"approx KL x100", {}}, reward{"mean reward", {}};
  for (const IterationStats& s : log) {
    first.y.push_back(s.first_gain);
    best.y.push_back(s.best_gain);
    reward.y.push_back(s.mean_reward);
    entropy.y.push_back(s.entropy);
    kl.y.push_back(100 * s.approx_kl);
  }
  WriteText(file, RenderTrainingSvg("kernelgym train ppo", {{"speedup over the starter (geomean)", {first, best}},
                                                            {"reward per step", {reward}},
                                                            {"policy", {entropy, kl}}}));
}

int RunSweep(TrainCommand& c, Session& s) {
  std::vector<std::string> tasks = TrainingTasks(*s.evaluator, *s.client, c);
  tasks.insert(tasks.end(), c.selection.holdout.begin(), c.selection.holdout.end());
  for (const std::string& id : tasks) {
    const KnobSpace space = KnobSpace::FromTask(s.evaluator->Task(id));
    if (space.empty()) {
      std::cerr << "kernelgym train sweep: " << id << " has no knob template\n";
      return 2;
    }
    const Measurement& starter = s.evaluator->Starter(id);
    std::vector<Evaluator::Request> requests;
    for (const Setting& setting : space.Enumerate()) requests.push_back({id, space.ToKnobs(setting)});
    const std::size_t before = s.evaluator->evaluations();
    const std::vector<Measurement> measured = s.evaluator->Measure(requests);
    const Measurement* best = nullptr;
    std::size_t failed = 0;
    for (const Measurement& m : measured) {
      if (!m.ok()) ++failed;
      else if (!best || m.speedup > best->speedup) best = &m;
    }
    std::cout << std::fixed << std::setprecision(3) << id << ": " << measured.size() << " settings ("
              << s.evaluator->evaluations() - before << " measured now), " << failed << " failed; starter "
              << starter.speedup << "x";
    if (best) std::cout << ", best " << best->speedup << "x (" << best->key << ")";
    std::cout << std::endl;
  }
  std::cout << "measurements: " << s.store->file().string() << " (" << s.store->size() << ")\n";
  return 0;
}

int RunPpo(TrainCommand& c, Session& s, const ModelPlugin& plugin) {
  const fs::path out = c.out;
  const std::vector<std::string> tasks = TrainingTasks(*s.evaluator, *s.client, c);
  if (tasks.empty()) {
    std::cerr << "kernelgym train ppo: no templated training tasks (--suite / --task, minus --holdout)\n";
    return 2;
  }
  std::string error;
  std::unique_ptr<PolicyModel> policy =
      c.init.empty() ? plugin.create_policy(BuildLayout(s.evaluator->feature_names(), TaskInfos(*s.evaluator, tasks), c.knob_names), c.model)
                     : plugin.load_policy(c.init, c.model.learning_rate, error);
  if (!policy || !CheckServerFeatures(policy->layout(), s.evaluator->feature_names(), error)) {
    std::cerr << "kernelgym train ppo: " << error << "\n";
    return 2;
  }
  const std::vector<TaskInfo> infos = LoadInfos(*s.evaluator, policy->layout(), tasks, true);
  fs::create_directories(out / "checkpoints");
  std::ofstream log_file(out / "train_log.jsonl", std::ios::trunc);
  std::vector<IterationStats> log;
  json info = Provenance(c, "ppo", tasks, *s.client);
  info["ppo"] = {{"iterations", c.ppo.iterations}, {"episodes", c.ppo.episodes}, {"steps", c.ppo.steps},
                 {"epochs", c.ppo.epochs},         {"minibatch", c.ppo.minibatch}, {"gamma", c.ppo.gamma},
                 {"lambda", c.ppo.lambda},         {"entropy_coef", c.ppo.update.entropy_coef},
                 {"learning_rate", c.model.learning_rate}, {"init", c.init}};
  PpoTrainer trainer(*policy, *s.evaluator, Pointers(infos), c.ppo);
  trainer.Train([&](const IterationStats& stats) {
    log.push_back(stats);
    log_file << stats.ToJson().dump() << std::endl;
    std::cerr << std::fixed << std::setprecision(3) << "iteration " << stats.iteration << ": reward " << stats.mean_reward
              << ", step-1 " << stats.first_gain << "x, best " << stats.best_gain << "x the starter, entropy "
              << stats.entropy << ", kl " << stats.approx_kl << ", " << stats.evaluations << " evaluations ("
              << stats.reused << " re-used), " << std::setprecision(1) << stats.seconds << " s\n";
    WriteTrainingPlot(out / "train_log.svg", log);
    if (c.checkpoint_every > 0 && stats.iteration % c.checkpoint_every == 0) {
      char name[32];
      std::snprintf(name, sizeof(name), "iter-%04d.pt", stats.iteration);
      std::string save_error;
      if (!policy->Save(out / "checkpoints" / name, info, save_error)) std::cerr << "checkpoint: " << save_error << "\n";
    }
  });
  info["measurements"] = {{"file", s.store->file().string()}, {"size", s.store->size()}};
  if (!policy->Save(out / "policy.pt", info, error)) {
    std::cerr << "kernelgym train ppo: " << error << "\n";
    return 1;
  }
  std::cout << "policy: " << (out / "policy.pt").string() << " (" << tasks.size() << " training tasks, "
            << c.ppo.iterations << " iterations, " << s.evaluator->evaluations() << " evaluations, "
            << s.evaluator->reused() << " re-used)\n";
  RunHeldout(*policy, s, c, out);
  return 0;
}

// --data read, and the selected training tasks it has settings of; nullopt (said on stderr) when
// the files cannot be read or hold none of them.
std::optional<std::pair<KnobDataset, std::vector<std::string>>> DataAndTasks(const TrainCommand& c, Session& s,
                                                                             const std::string& command) {
  std::string error;
  std::vector<fs::path> files(c.data.begin(), c.data.end());
  std::optional<KnobDataset> data = LoadKnobDataset(files, error);
  if (!data) {
    std::cerr << "kernelgym train " << command << ": " << error << "\n";
    return std::nullopt;
  }
  std::vector<std::string> tasks;
  for (const std::string& t : TrainingTasks(*s.evaluator, *s.client, c))
    if (data->by_task.count(t)) tasks.push_back(t);
  if (tasks.empty()) {
    std::cerr << "kernelgym train " << command << ": the data has no knob settings of the selected training tasks\n";
    return std::nullopt;
  }
  return std::pair{std::move(*data), std::move(tasks)};
}

int RunBc(TrainCommand& c, Session& s, const ModelPlugin& plugin) {
  auto selected = DataAndTasks(c, s, "bc");
  if (!selected) return 2;
  const auto& [data_set, tasks] = *selected;
  const KnobDataset* data = &data_set;
  std::string error;
  std::unique_ptr<PolicyModel> policy =
      c.init.empty() ? plugin.create_policy(BuildLayout(s.evaluator->feature_names(), TaskInfos(*s.evaluator, tasks), c.knob_names), c.model)
                     : plugin.load_policy(c.init, c.model.learning_rate, error);
  if (!policy || !CheckServerFeatures(policy->layout(), s.evaluator->feature_names(), error)) {
    std::cerr << "kernelgym train bc: " << error << "\n";
    return 2;
  }
  const std::vector<TaskInfo> infos = LoadInfos(*s.evaluator, policy->layout(), tasks, true);
  const std::vector<double> losses = CloneBestSettings(*policy, Pointers(infos), *data, c.fit);
  json info = Provenance(c, "bc", tasks, *s.client);
  info["bc"] = {{"data", c.data}, {"epochs", c.fit.epochs}, {"final_loss", losses.empty() ? 0.0 : losses.back()}};
  const fs::path out = c.out;
  if (!policy->Save(out / "policy.pt", info, error)) {
    std::cerr << "kernelgym train bc: " << error << "\n";
    return 1;
  }
  std::cout << std::fixed << std::setprecision(3) << "policy: " << (out / "policy.pt").string() << " (cloned the best of "
            << tasks.size() << " tasks from " << data->rows << " rows; loss " << (losses.empty() ? 0.0 : losses.front())
            << " -> " << (losses.empty() ? 0.0 : losses.back()) << ")\n";
  RunHeldout(*policy, s, c, out);
  return 0;
}

int RunCostModel(TrainCommand& c, Session& s, const ModelPlugin& plugin) {
  auto selected = DataAndTasks(c, s, "cost-model");
  if (!selected) return 2;
  const auto& [data_set, tasks] = *selected;
  const KnobDataset* data = &data_set;
  std::string error;
  const FeatureLayout layout = BuildLayout(s.evaluator->feature_names(), TaskInfos(*s.evaluator, tasks), c.knob_names);
  std::unique_ptr<CostModel> model = plugin.create_cost_model(layout, c.model);
  const std::vector<TaskInfo> infos = LoadInfos(*s.evaluator, layout, tasks, false);
  std::size_t samples = 0;
  const std::vector<double> losses = FitCostModel(*model, Pointers(infos), *data, c.fit, samples);
  json report = {{"training_tasks", tasks}, {"samples", samples}, {"epochs", c.fit.epochs},
                 {"first_loss", losses.empty() ? 0.0 : losses.front()}, {"final_loss", losses.empty() ? 0.0 : losses.back()},
                 {"holdout", json::array()}};
  std::cout << std::fixed << std::setprecision(3) << "cost model: " << samples << " correct settings of " << tasks.size()
            << " tasks; loss " << report["first_loss"].get<double>() << " -> " << report["final_loss"].get<double>() << "\n";
  // Ranking quality on held-out tasks, from the data and the measurement store.
  for (const std::string& id : c.selection.holdout) {
    // The store's measurement of a setting first, then the data's settings the store lacks.
    std::vector<Measurement> rows;
    std::set<std::string> keys;
    for (const Measurement* m : s.store->ForTask(id))
      if (m->key != kStarterKey && keys.insert(m->key).second) rows.push_back(*m);
    if (const auto it = data->by_task.find(id); it != data->by_task.end())
      for (const Measurement& m : it->second)
        if (keys.insert(m.key).second) rows.push_back(m);
    if (rows.empty()) continue;
    const TaskInfo info = LoadTaskInfo(*s.evaluator, layout, id, false);
    const RankQuality q = MeasureRanking(*model, info, rows);
    report["holdout"].push_back({{"task", id}, {"samples", q.samples}, {"spearman", q.spearman},
                                 {"top1_fraction_of_best", q.top1_fraction}});
    std::cout << "  held-out " << id << ": " << q.samples << " settings, rank correlation " << q.spearman
              << ", the top-ranked setting reaches " << q.top1_fraction << " of the best measured\n";
  }
  json info = Provenance(c, "cost-model", tasks, *s.client);
  info["cost_model"] = {{"data", c.data}, {"samples", samples}, {"epochs", c.fit.epochs}};
  const fs::path out = c.out;
  if (!model->Save(out / "cost_model.pt", info, error)) {
    std::cerr << "kernelgym train cost-model: " << error << "\n";
    return 1;
  }
  WriteText(out / "cost_model.json", report.dump(2) + "\n");
  std::cout << "cost model: " << (out / "cost_model.pt").string() << "\n";
  return 0;
}

int RunEval(TrainCommand& c, Session& s, const ModelPlugin& plugin) {
  std::string error;
  std::unique_ptr<PolicyModel> policy = plugin.load_policy(c.policy, c.model.learning_rate, error);
  if (!policy || !CheckServerFeatures(policy->layout(), s.evaluator->feature_names(), error)) {
    std::cerr << "kernelgym train eval: " << error << "\n";
    return 2;
  }
  c.selection.holdout.insert(c.selection.holdout.end(), c.selection.tasks.begin(), c.selection.tasks.end());
  if (c.selection.holdout.empty()) {
    std::cerr << "kernelgym train eval: name the tasks to evaluate on (--holdout or --task)\n";
    return 2;
  }
  RunHeldout(*policy, s, c, c.out);
  return 0;
}

void AddSelection(CLI::App& app, TrainCommand& c, bool training) {
  if (training) {
    app.add_option("--suite", c.selection.suites, "train on every templated task of this suite (repeatable)");
    app.add_option("--task", c.selection.tasks, "train on this task (repeatable; instead of --suite)");
  } else {
    app.add_option("--task", c.selection.tasks, "a task (repeatable)");
  }
  app.add_option("--holdout", c.selection.holdout, "a held-out task: never trained on, evaluated at the end (repeatable)");
}

void AddCommon(CLI::App& app, TrainCommand& c) {
  app.add_option("--backend", c.backend, "runner backend")->capture_default_str();
  app.add_option("--measurements", c.measurements,
                 "the measurement store: read, and appended to (default <out>/measurements.jsonl)");
  app.add_option("--envs-per-task", c.envs_per_task, "envs of one task evaluating at once")->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--seed", c.model.seed, "initial weights and every draw")->capture_default_str();
  policies::AddEnvFlags(app, c.env);
}

void AddModelFlags(CLI::App& app, TrainCommand& c) {
  app.add_flag("!--no-knob-names", c.knob_names,
               "a new model reads no knob names or string values (each is 'other'): only what any template has, "
               "each value's position, domain size, default-ness and magnitude");
  app.add_option("--hidden", c.model.hidden, "hidden units per layer")->capture_default_str()->check(CLI::Range(4, 4096));
  app.add_option("--lr", c.model.learning_rate, "Adam's learning rate")->capture_default_str()->check(CLI::Range(1e-6, 1.0));
}

void AddHeldoutFlags(CLI::App& app, TrainCommand& c) {
  app.add_option("--k", c.heldout.steps, "held-out: settings per episode (the 'after k steps')")->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--eval-seeds", c.heldout.seeds, "held-out: episodes of random and sampled choice per task")
      ->capture_default_str()->check(CLI::Range(1, 1000));
}

}  // namespace

void AddTrainCommand(CLI::App& app, TrainCommand& c) {
  c.app = app.add_subcommand("train", "learned knob policies (PPO, behavior cloning) and cost models (docs/learned.md)");
  c.app->require_subcommand(1);

  c.sweep = c.app->add_subcommand("sweep", "measure every setting of tasks' knob templates into the measurement store");
  AddSelection(*c.sweep, c, true);
  AddCommon(*c.sweep, c);
  c.sweep->add_option("--out", c.out, "folder for measurements.jsonl when --measurements is not given")->default_val("sweep");

  c.ppo_app = c.app->add_subcommand("ppo", "train a knob policy with PPO; evaluate it on --holdout tasks");
  AddSelection(*c.ppo_app, c, true);
  AddCommon(*c.ppo_app, c);
  AddModelFlags(*c.ppo_app, c);
  AddHeldoutFlags(*c.ppo_app, c);
  c.ppo_app->add_option("--out", c.out, "output folder: policy.pt, checkpoints/, train_log.jsonl/.svg, heldout.json/.md")
      ->required();
  c.ppo_app->add_option("--init", c.init, "start from this policy (e.g. one from `train bc`)");
  c.ppo_app->add_option("--iterations", c.ppo.iterations, "PPO iterations")->capture_default_str()->check(CLI::Range(0, 100000));
  c.ppo_app->add_option("--episodes", c.ppo.episodes, "episodes per iteration, stepped together")->capture_default_str()
      ->check(CLI::Range(1, 4096));
  c.ppo_app->add_option("--steps", c.ppo.steps, "knob settings per episode")->capture_default_str()->check(CLI::Range(1, 1000));
  c.ppo_app->add_option("--epochs", c.ppo.epochs, "update passes per iteration")->capture_default_str()->check(CLI::Range(1, 100));
  c.ppo_app->add_option("--minibatch", c.ppo.minibatch, "samples per gradient step")->capture_default_str()
      ->check(CLI::Range(1, 65536));
  c.ppo_app->add_option("--gamma", c.ppo.gamma, "discount")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  c.ppo_app->add_option("--lambda", c.ppo.lambda, "GAE lambda")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  c.ppo_app->add_option("--clip", c.ppo.update.clip, "PPO ratio clip")->capture_default_str()->check(CLI::Range(0.01, 1.0));
  c.ppo_app->add_option("--entropy-coef", c.ppo.update.entropy_coef, "entropy bonus")->capture_default_str()
      ->check(CLI::Range(0.0, 10.0));
  c.ppo_app->add_option("--checkpoint-every", c.checkpoint_every, "iterations between checkpoints (0: none)")
      ->capture_default_str();

  c.bc = c.app->add_subcommand("bc", "behavior cloning: a policy whose first setting is the best one in a dataset");
  AddSelection(*c.bc, c, true);
  AddCommon(*c.bc, c);
  AddModelFlags(*c.bc, c);
  AddHeldoutFlags(*c.bc, c);
  c.bc->add_option("--data", c.data, "knob evaluations: measurement files or `kernelgym collect` transitions.jsonl (repeatable)")
      ->required();
  c.bc->add_option("--out", c.out, "output folder: policy.pt, heldout.json/.md")->required();
  c.bc->add_option("--init", c.init, "start from this policy");
  c.bc->add_option("--epochs", c.fit.epochs, "passes over the data")->capture_default_str()->check(CLI::Range(1, 100000));

  c.cost = c.app->add_subcommand("cost-model", "fit the cost model (log-speedup of a knob setting) for `search --cost-model`");
  AddSelection(*c.cost, c, true);
  AddCommon(*c.cost, c);
  AddModelFlags(*c.cost, c);
  c.cost->add_option("--data", c.data, "knob evaluations: measurement files or `kernelgym collect` transitions.jsonl (repeatable)")
      ->required();
  c.cost->add_option("--out", c.out, "output folder: cost_model.pt, cost_model.json")->required();
  c.cost->add_option("--epochs", c.fit.epochs, "passes over the data")->capture_default_str()->check(CLI::Range(1, 100000));

  c.eval = c.app->add_subcommand("eval", "a saved policy on tasks against the defaults and random knobs");
  AddSelection(*c.eval, c, false);
  AddCommon(*c.eval, c);
  AddHeldoutFlags(*c.eval, c);
  c.eval->add_option("--policy", c.policy, "the policy file")->required();
  c.eval->add_option("--out", c.out, "output folder: heldout.json/.md")->required();
}

int RunTrainCommand(TrainCommand& c) {
  const bool needs_model = !c.sweep->parsed();
  std::string error;
  const ModelPlugin* plugin = needs_model ? LoadModelPlugin(error) : nullptr;
  if (needs_model && !plugin) {
    std::cerr << "kernelgym train: " << error << "\n";
    return 2;
  }
  if (c.sweep->parsed() || c.ppo_app->parsed() || c.bc->parsed() || c.cost->parsed())
    if (c.selection.suites.empty() && c.selection.tasks.empty() && !(c.sweep->parsed() && !c.selection.holdout.empty())) {
      std::cerr << "kernelgym train: choose tasks with --suite or --task\n";
      return 2;
    }
  c.ppo.seed = c.fit.seed = c.heldout.seed = c.model.seed;
  const fs::path measurements = c.measurements.empty() ? fs::path(c.out) / "measurements.jsonl" : fs::path(c.measurements);
  Session s;
  try {
    if (!OpenSession(c, measurements, s, error)) {
      std::cerr << "kernelgym train: " << error << "\n";
      return 1;
    }
    if (c.sweep->parsed()) return RunSweep(c, s);
    if (c.ppo_app->parsed()) return RunPpo(c, s, *plugin);
    if (c.bc->parsed()) return RunBc(c, s, *plugin);
    if (c.cost->parsed()) return RunCostModel(c, s, *plugin);
    return RunEval(c, s, *plugin);
  } catch (const std::exception& e) {
    std::cerr << "kernelgym train: " << e.what() << " (measurements so far are in " << measurements.string() << ")\n";
    return 1;
  }
}

}  // namespace kernelgym::learned
