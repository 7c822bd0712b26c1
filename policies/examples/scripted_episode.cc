// A scripted policy: one short episode through the C++ client, the README's main job.
//   reset (the starter) -> replace with an improved kernel -> a broken edit -> submit
// Prints every observation's Markdown and reward. Exits 0 only when the server answered every
// step and the verdicts are the expected ones (improved: ok, broken: compile error, submit:
// terminated), so the main job fails loudly if the environment does not work.
//
//   kernelgym-demo --connect tcp://127.0.0.1:5555 --task cpu/softmax_rows --improved kernel.cpp
#include <CLI/CLI.hpp>

#include <fstream>
#include <iostream>
#include <sstream>

#include "env/client/client.h"

namespace {

using namespace kernelgym;

void Show(const std::string& title, const protocol::Observation& o, const double* reward, bool terminated,
          bool truncated) {
  std::cout << "\n==== " << title << " ====\n" << o.text;
  if (reward)
    std::cout << "\n-> reward " << *reward << (terminated ? ", terminated" : "") << (truncated ? ", truncated" : "")
              << "\n";
}

bool Expect(bool condition, const std::string& what) {
  if (!condition) std::cerr << "kernelgym-demo: unexpected: " << what << "\n";
  return condition;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kernelgym-demo: one scripted episode through the C++ client"};
  std::string endpoint = "tcp://127.0.0.1:5555", task = "cpu/softmax_rows", improved_path;
  bool record = false;
  app.add_option("--connect", endpoint, "the server's client endpoint")->capture_default_str();
  app.add_option("--task", task, "task id")->capture_default_str();
  app.add_option("--improved", improved_path, "an improved kernel source for the task")->required();
  app.add_flag("--record", record, "record the episode in the server's trajectory store");
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(improved_path);
  if (!in) {
    std::cerr << "kernelgym-demo: cannot read " << improved_path << "\n";
    return 2;
  }
  std::stringstream improved;
  improved << in.rdbuf();

  try {
    client::Client env_client(client::ClientOptions{.endpoint = endpoint, .request_timeout_s = 300});
    const protocol::HelloResult hello = env_client.Hello();
    std::cout << hello.server << " (protocol " << hello.protocol << "), backends with runners:";
    for (const std::string& b : hello.backends) std::cout << " " << b;
    std::cout << "\n";

    protocol::EnvMakeRequest make;
    make.task = task;
    make.max_steps = 8;
    make.record = record;
    const protocol::EnvInfo env = env_client.Make(make);
    std::cout << "env " << env.env << ": " << env.task << " on " << env.backend << ", reward " << env.reward << " in ["
              << env.reward_min << ", " << env.reward_max << "]\n";

    bool ok = true;
    const protocol::ResetResult reset = env_client.Reset(env.env, 2026);
    Show("reset: the starter kernel", reset.observation, nullptr, false, false);
    ok &= Expect(reset.observation.status == "ok", "the starter is not ok: " + reset.observation.message);

    const protocol::StepResult better = env_client.Step(env.env, protocol::ReplaceAction{improved.str()});
    Show("step 1: replace with an improved kernel", better.observation, &better.reward, better.terminated,
         better.truncated);
    ok &= Expect(better.observation.status == "ok", "the improved kernel is not ok: " + better.observation.message);
    ok &= Expect(better.observation.speedup > reset.observation.speedup, "the improved kernel is not faster");

    const protocol::StepResult broken = env_client.Step(
        env.env, protocol::EditAction{{{"extern \"C\" void kernel(", "extern \"C\" void kernel(undeclared_type u, "}}});
    Show("step 2: a broken edit", broken.observation, &broken.reward, broken.terminated, broken.truncated);
    ok &= Expect(broken.observation.status == "compile_error", "the broken edit compiled: " + broken.observation.status);
    ok &= Expect(broken.reward < 0, "the broken edit was not penalized");

    // Back to the improved kernel (step 1), then the final, stricter evaluation.
    const protocol::StepResult revert = env_client.Step(env.env, protocol::RevertAction{1});
    Show("step 3: revert to step 1", revert.observation, &revert.reward, revert.terminated, revert.truncated);
    ok &= Expect(revert.observation.reused, "reverting to an evaluated source did not re-use its evaluation");

    const protocol::StepResult submit = env_client.Step(env.env, protocol::SubmitAction{});
    Show("step 4: submit", submit.observation, &submit.reward, submit.terminated, submit.truncated);
    ok &= Expect(submit.terminated && submit.observation.status == "ok", "submit did not terminate with ok");

    env_client.Close(env.env);
    std::cout << "\nepisode done: best speedup " << submit.observation.best_speedup << "x over the reference\n";
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "kernelgym-demo: " << e.what() << "\n";
    return 1;
  }
}
