// `kernelgym hitl` driven as a person drives it: the real program in a real terminal (tmux), keys
// sent with send-keys, the screen read back with capture-pane. The model is the scripted endpoint
// (policies/agent/scripted/softmax_rows), the editor a script that edits the file it is given.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "core/subprocess.h"
#include "datasets/trajectory/reader.h"
#include "policies/llm/scripted_server.h"
#include "server_fixture.h"

namespace kernelgym::testing {
namespace {

const std::filesystem::path kSource = KERNELGYM_SOURCE_DIR;

ProcessResult Tmux(const std::string& socket, std::vector<std::string> args) {
  SpawnOptions options;
  options.argv = {"/usr/bin/tmux", "-L", socket};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  for (char** e = environ; *e; ++e) options.env.push_back(*e);
  return RunProcess(options, 30);
}

// One tmux server (its own socket) running one command in a 200x60 terminal.
class Terminal {
 public:
  explicit Terminal(const std::string& command) : socket_("kgtest-" + std::to_string(getpid())) {
    const ProcessResult started =
        Tmux(socket_, {"new-session", "-d", "-s", "t", "-x", "200", "-y", "60", command + "; echo EXITED-$?; sleep 600"});
    EXPECT_TRUE(started.ok()) << started.Describe() << started.stderr_text;
    Tmux(socket_, {"set-option", "-t", "t", "history-limit", "100000"});
  }
  ~Terminal() {
    if (::testing::Test::HasFailure()) std::cerr << "---- terminal ----\n" << Screen() << "\n------------------\n";
    Tmux(socket_, {"kill-server"});
  }
  // Types a line and presses Enter.
  void Type(const std::string& line) {
    Tmux(socket_, {"send-keys", "-t", "t", "-l", line});
    Tmux(socket_, {"send-keys", "-t", "t", "Enter"});
  }
  // Everything the terminal has shown (scrollback included).
  std::string Screen() { return Tmux(socket_, {"capture-pane", "-p", "-J", "-t", "t", "-S", "-100000"}).stdout_text; }
  // Waits until `text` has appeared `times` times in total.
  bool WaitFor(const std::string& text, int times = 1, double seconds = 120) {
    return testing::WaitFor(
        [&] {
          const std::string screen = Screen();
          int n = 0;
          for (std::size_t at = screen.find(text); at != std::string::npos; at = screen.find(text, at + 1)) ++n;
          return n >= times;
        },
        seconds);
  }

 private:
  std::string socket_;
};

// The editor: a plan (.md) gets a line from the person; a kernel gets the AVX2 softmax.
std::filesystem::path WriteEditor(const std::filesystem::path& dir) {
  const std::filesystem::path editor = dir / "editor.sh";
  std::ofstream(editor) << "#!/bin/sh\ncase \"$1\" in\n  *.md) echo 'Human note: keep a scalar tail loop.' >> \"$1\" ;;\n"
                        << "  *) cp " << (kSource / "tests/honest/softmax_rows_avx2/kernel.cpp").string()
                        << " \"$1\" ;;\nesac\n";
  std::filesystem::permissions(editor, std::filesystem::perms::owner_all);
  return editor;
}

TEST(HitlTest, APersonPlansEditsImplementsDebugsAndSubmitsWithTheRoles) {
  ServerProcess server({"--local-runners", "1"});
  std::unique_ptr<llm::ScriptedServer> model =
      llm::ScriptedServer::FromFile(kSource / "policies/agent/scripted/softmax_rows/script.json");
  model->Start();
  const std::filesystem::path editor = WriteEditor(server.dir());
  Terminal terminal("NO_PROXY=127.0.0.1 EDITOR=" + editor.string() + " " + KERNELGYM_CLI +
                    " hitl --task cpu/softmax_rows --connect " + server.clients() + " --endpoint " + model->base_url() +
                    " --model scripted --llm-timeout-s 30");
  ASSERT_TRUE(terminal.WaitFor("kernelgym> ")) << "no prompt after the starter";
  EXPECT_TRUE(terminal.WaitFor("step 0: ok"));

  terminal.Type("plan");
  ASSERT_TRUE(terminal.WaitFor("`plan edit` to change it"));
  EXPECT_TRUE(terminal.WaitFor("## Strategy"));
  terminal.Type("plan edit");  // the person amends the plan before it is implemented
  ASSERT_TRUE(terminal.WaitFor("plan updated"));
  terminal.Type("implement");  // the scripted implementer's edit does not compile
  ASSERT_TRUE(terminal.WaitFor("step 1: compile_error"));
  terminal.Type("debug");      // the debugger fixes it (after an HTTP 503, retried)
  ASSERT_TRUE(terminal.WaitFor("step 2: ok"));
  terminal.Type("edit");       // the person writes the kernel
  ASSERT_TRUE(terminal.WaitFor("edited; `run` evaluates it"));
  terminal.Type("run");
  ASSERT_TRUE(terminal.WaitFor("step 3: ok"));
  terminal.Type("analyze");
  ASSERT_TRUE(terminal.WaitFor("analyst's decision: tune"));
  terminal.Type("revert 2");
  ASSERT_TRUE(terminal.WaitFor("step 4: ok"));
  terminal.Type("bogus");
  ASSERT_TRUE(terminal.WaitFor("unknown command 'bogus'"));
  terminal.Type("history");
  ASSERT_TRUE(terminal.WaitFor("step 3 (replace by human): ok"));
  terminal.Type("revert 3");
  ASSERT_TRUE(terminal.WaitFor("step 5: ok"));
  terminal.Type("submit");
  ASSERT_TRUE(terminal.WaitFor("EXITED-0")) << "submit of the person's kernel did not pass";
  const std::string screen = terminal.Screen();
  EXPECT_NE(screen.find("submitted: "), std::string::npos);
  EXPECT_NE(screen.find("'inv_sum' was not declared"), std::string::npos) << "the compile error was not shown";

  // The implementer got the plan as the person edited it.
  bool implementer_got_edit = false;
  for (const llm::ScriptedRequest& r : model->requests())
    if (r.body["messages"][0]["content"].get<std::string>().find("You are an expert") != std::string::npos)
      implementer_got_edit |= r.body["messages"][1]["content"].get<std::string>().find("Human note: keep a scalar tail loop.") !=
                              std::string::npos;
  EXPECT_TRUE(implementer_got_edit);

  // The episode is recorded with who acted and what the model was asked.
  ASSERT_EQ(server.Terminate(30), 0);
  TrajectoryReader reader(server.store());
  std::map<int64_t, nlohmann::json> steps;
  for (nlohmann::json record; reader.Next(record);)
    if (record["kind"] == "transition") steps[record["step"].get<int64_t>()] = record;
  ASSERT_EQ(steps.size(), 6u);
  EXPECT_EQ(steps[1]["meta"]["actor"], "implementer");
  EXPECT_EQ(steps[1]["meta"]["exchanges"].size(), 2u);  // the planner's and the implementer's
  EXPECT_EQ(steps[2]["meta"]["actor"], "debugger");
  EXPECT_EQ(steps[3]["meta"]["actor"], "human");
  EXPECT_EQ(steps[4]["meta"]["exchanges"][0]["role"], "profiler");
}

TEST(HitlTest, WithoutAModelThePersonIsTheImplementer) {
  ServerProcess server({"--local-runners", "1"});
  Terminal terminal(std::string(KERNELGYM_CLI) + " hitl --task cpu/softmax_rows --connect " + server.clients());
  ASSERT_TRUE(terminal.WaitFor("kernelgym> "));
  terminal.Type("plan");
  ASSERT_TRUE(terminal.WaitFor("no model configured"));
  terminal.Type("knobs SIMD=1,EXP=exp_poly");
  ASSERT_TRUE(terminal.WaitFor("step 1: ok"));
  terminal.Type("knobs SIMD=7");
  ASSERT_TRUE(terminal.WaitFor("step 2: invalid_action"));
  terminal.Type("revert");
  ASSERT_TRUE(terminal.WaitFor("revert takes a step number"));
  terminal.Type("quit");
  ASSERT_TRUE(terminal.WaitFor("EXITED-1"));
  EXPECT_NE(terminal.Screen().find("leaving without submitting"), std::string::npos);
}

}  // namespace
}  // namespace kernelgym::testing
