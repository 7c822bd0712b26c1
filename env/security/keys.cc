#include "env/security/curve_socket.h"
#include "env/security/keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace kernelgym::security {
namespace {

std::string Field(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line.compare(start, name.size(), name) != 0) continue;
    const auto eq = line.find('=', start + name.size());
    if (eq == std::string::npos) continue;
    std::string value = line.substr(eq + 1);
    const auto first = value.find_first_not_of(" \t\"'");
    const auto last = value.find_last_not_of(" \t\"'\r");
    return first == std::string::npos ? "" : value.substr(first, last - first + 1);
  }
  return "";
}

bool ValidZ85Key(const std::string& key) {
  if (key.size() != 40) return false;
  uint8_t decoded[32];
  return zmq_z85_decode(decoded, key.c_str()) != nullptr;
}

std::string Certificate(const KeyPair& keys, bool with_secret) {
  std::ostringstream out;
  out << "#   ZeroMQ CURVE " << (with_secret ? "**Secret**" : "Public") << " Certificate, written by kernelgym\n"
      << (with_secret ? "#   Keep this file secret: it authenticates its holder.\n"
                      : "#   Give this file to the other side (an allow-list folder, or a client's server key).\n")
      << "\nmetadata\ncurve\n    public-key = \"" << keys.public_key << "\"\n";
  if (with_secret) out << "    secret-key = \"" << keys.secret_key << "\"\n";
  return out.str();
}

bool WriteNew(const std::filesystem::path& file, const std::string& text, mode_t mode, std::string& error) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    error = "cannot create " + file.string() + ": " + std::strerror(errno) +
            (errno == EEXIST ? " (keys are never overwritten: remove it or choose another name)" : "");
    return false;
  }
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok) error = "cannot write " + file.string();
  return ok;
}

}  // namespace

KeyPair GenerateKeyPair() {
  char public_key[41], secret_key[41];
  if (zmq_curve_keypair(public_key, secret_key) != 0)
    throw std::runtime_error("zmq_curve_keypair failed: this libzmq has no CURVE support");
  return {public_key, secret_key};
}

bool WriteKeyPair(const std::filesystem::path& stem, const KeyPair& keys, std::string& error) {
  if (stem.has_parent_path()) std::filesystem::create_directories(stem.parent_path());
  return WriteNew(stem.string() + ".key", Certificate(keys, true), 0600, error) &&
         WriteNew(stem.string() + ".pub", Certificate(keys, false), 0644, error);
}

std::optional<KeyPair> LoadCertificate(const std::filesystem::path& file, bool need_secret, std::string& error) {
  std::ifstream in(file);
  if (!in) {
    error = "cannot read the key file " + file.string();
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  KeyPair keys{Field(text.str(), "public-key"), Field(text.str(), "secret-key")};
  if (!ValidZ85Key(keys.public_key)) {
    error = file.string() + " has no valid public-key (40 Z85 characters): not a ZeroMQ certificate";
    return std::nullopt;
  }
  if (need_secret && !ValidZ85Key(keys.secret_key)) {
    error = file.string() + " has no secret-key: a key pair (NAME.key from `kernelgym keys generate`) is needed here, "
                            "not a public certificate";
    return std::nullopt;
  }
  return keys;
}

std::optional<AllowList> LoadAllowList(const std::filesystem::path& path, std::string& error) {
  AllowList allow;
  std::vector<std::filesystem::path> files;
  if (std::filesystem::is_directory(path)) {
    for (const auto& entry : std::filesystem::directory_iterator(path))
      if (entry.path().extension() == ".pub") files.push_back(entry.path());
  } else if (std::filesystem::exists(path)) {
    files.push_back(path);
  } else {
    error = "no allow-list at " + path.string();
    return std::nullopt;
  }
  for (const auto& file : files) {
    auto keys = LoadCertificate(file, false, error);
    if (!keys) return std::nullopt;
    allow[keys->public_key] = file.stem().string();
  }
  return allow;
}

bool IsLoopbackEndpoint(std::string_view endpoint) {
  if (endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://")) return true;
  if (!endpoint.starts_with("tcp://")) return false;
  std::string_view host = endpoint.substr(6);
  if (host.starts_with("[")) {
    const auto close = host.find(']');
    return close != std::string_view::npos && host.substr(1, close - 1) == "::1";
  }
  host = host.substr(0, host.rfind(':'));
  return host == "localhost" || host.starts_with("127.");
}

std::optional<CurveClientKeys> LoadClientKeys(const std::filesystem::path& server_certificate,
                                              const std::filesystem::path& own_key_pair, std::string& error) {
  const auto server = LoadCertificate(server_certificate, false, error);
  if (!server) return std::nullopt;
  auto own = LoadCertificate(own_key_pair, true, error);
  if (!own) return std::nullopt;
  return CurveClientKeys{server->public_key, *own};
}

std::optional<CurveClientKeys> ClientKeysFromEnvironment(const char* server_variable, const char* own_variable,
                                                         std::string& error) {
  const char* server = std::getenv(server_variable);
  const char* own = std::getenv(own_variable);
  const bool has_server = server && *server, has_own = own && *own;
  if (!has_server && !has_own) return std::nullopt;
  if (!has_server || !has_own) {
    error = std::string(has_server ? own_variable : server_variable) + " is not set but " +
            (has_server ? server_variable : own_variable) + " is: CURVE needs both the server's public key and " +
            "this side's key pair";
    return std::nullopt;
  }
  return LoadClientKeys(server, own, error);
}

void ApplyCurveClient(zmq::socket_t& socket, const CurveClientKeys& keys) {
  socket.set(zmq::sockopt::curve_serverkey, keys.server_public_key);
  socket.set(zmq::sockopt::curve_publickey, keys.own.public_key);
  socket.set(zmq::sockopt::curve_secretkey, keys.own.secret_key);
}

void ApplyCurveServer(zmq::socket_t& socket, const KeyPair& server, const std::string& zap_domain) {
  socket.set(zmq::sockopt::curve_server, true);
  socket.set(zmq::sockopt::curve_secretkey, server.secret_key);
  // ZAP_ENFORCE_DOMAIN (fail when no handler answers) is a draft option Debian's libzmq lacks:
  // the server starts its ZAP handler before it binds, so every CURVE handshake is asked.
  socket.set(zmq::sockopt::zap_domain, zap_domain);
}

}  // namespace kernelgym::security
