// `kernelgym keys generate --out NAME`: a CURVE key pair as NAME.key (secret) and NAME.pub.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kernelgym {

struct KeysCommand {
  std::string out;
  CLI::App* app = nullptr;
  CLI::App* generate = nullptr;
};

void AddKeysCommand(CLI::App& app, KeysCommand& command);
int RunKeysCommand(const KeysCommand& command);

}  // namespace kernelgym
