// The server's ZAP handler (ZeroMQ RFC 27): ZeroMQ asks it, during every CURVE handshake on a
// socket with a ZAP domain, whether the peer's public key may connect. It answers from one
// allow-list per domain; a key on none is refused (status 400) before the peer can send a byte
// of work. An accepted peer's name (its certificate's file name) becomes the "User-Id" of every
// message it sends, which is how the server tells authenticated clients apart.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <map>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "env/security/keys.h"

namespace kernelgym::security {

class ZapHandler {
 public:
  // Binds inproc://zeromq.zap.01 in `context` (one handler per context) and answers on its own
  // thread until destroyed. `on_refused(domain, key, reason)` is called from that thread.
  using Refused = std::function<void(const std::string& domain, const std::string& key, const std::string& reason)>;
  ZapHandler(zmq::context_t& context, std::map<std::string, AllowList> allow_by_domain, Refused on_refused);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // Adds a key to a domain's allow-list (e.g. the server's own local runners). Thread-safe.
  void Allow(const std::string& domain, const std::string& public_key, const std::string& name);
  uint64_t accepted() const { return accepted_; }
  uint64_t refused() const { return refused_; }

 private:
  void Serve();

  zmq::socket_t socket_;
  std::mutex mutex_;  // guards allow_
  std::map<std::string, AllowList> allow_;
  Refused on_refused_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> accepted_{0}, refused_{0};
  std::thread thread_;
};

}  // namespace kernelgym::security
