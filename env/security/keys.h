// CurveZMQ keys and the rules for using them (docs/security.md).
//
// Key files are ZeroMQ certificates in the ZPL text format czmq and pyzmq write and read
// (`zmq.auth.load_certificate` reads ours): NAME.key holds `public-key` and `secret-key` (Z85,
// mode 0600), NAME.pub only `public-key`. `kernelgym keys generate` writes a pair; an allow-list
// is a folder of .pub files (or one .pub file) whose file names become the peers' names.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kernelgym::security {

struct KeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters; empty for a public certificate
};

KeyPair GenerateKeyPair();
// Writes <stem>.key (0600, created exclusively: an existing key is never overwritten) and
// <stem>.pub. false with `error`.
bool WriteKeyPair(const std::filesystem::path& stem, const KeyPair& keys, std::string& error);
// A certificate file: `need_secret` makes a file without a secret key an error (a .pub given
// where a key pair is needed).
std::optional<KeyPair> LoadCertificate(const std::filesystem::path& file, bool need_secret, std::string& error);

// Public key (Z85) -> name (the certificate's file stem).
using AllowList = std::map<std::string, std::string>;
// Every *.pub (and *.key: its public half) in a folder, or one certificate file.
std::optional<AllowList> LoadAllowList(const std::filesystem::path& path, std::string& error);

// tcp:// on 127.0.0.0/8, [::1] or localhost, and ipc:// / inproc://: endpoints only this host
// can reach. Everything else (0.0.0.0, a routable address, a host name, `*`) is "beyond loopback".
bool IsLoopbackEndpoint(std::string_view endpoint);

// What a connecting side (client, runner) needs: the server's public key and its own pair.
struct CurveClientKeys {
  std::string server_public_key;
  KeyPair own;
};
// From certificate files; nullopt with `error`.
std::optional<CurveClientKeys> LoadClientKeys(const std::filesystem::path& server_certificate,
                                              const std::filesystem::path& own_key_pair, std::string& error);
// From the environment variables named (e.g. KERNELGYM_SERVER_KEY, KERNELGYM_CLIENT_KEY): nullopt
// and no error when neither is set; an error when only one is, or a file cannot be read.
std::optional<CurveClientKeys> ClientKeysFromEnvironment(const char* server_variable, const char* own_variable,
                                                         std::string& error);
}  // namespace kernelgym::security
