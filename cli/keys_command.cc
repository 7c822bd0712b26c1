#include "cli/keys_command.h"

#include <iostream>

#include "env/security/keys.h"

namespace kernelgym {

void AddKeysCommand(CLI::App& app, KeysCommand& command) {
  command.app = app.add_subcommand("keys", "CURVE keys for authenticated transport (docs/security.md)");
  command.app->require_subcommand(1);
  command.generate = command.app->add_subcommand(
      "generate", "write a key pair: NAME.key (secret, mode 0600) and NAME.pub (give it to the other side)");
  command.generate->add_option("--out", command.out, "path and name without extension, e.g. keys/server")->required();
}

int RunKeysCommand(const KeysCommand& command) {
  std::string error;
  const security::KeyPair keys = security::GenerateKeyPair();
  if (!security::WriteKeyPair(command.out, keys, error)) {
    std::cerr << "kernelgym keys generate: " << error << "\n";
    return 1;
  }
  std::cout << command.out << ".key (secret) and " << command.out << ".pub (public key " << keys.public_key << ")\n";
  return 0;
}

}  // namespace kernelgym
