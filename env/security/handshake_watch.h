// A connecting socket's handshakes, watched through ZeroMQ's socket monitor, so that a refusal
// is an error with a reason instead of a request that silently times out: a key not on the
// server's allow-list (ZAP 400), CURVE against a plaintext server or the reverse.
#pragma once

#include <optional>
#include <string>
#include <zmq.hpp>

namespace kernelgym::security {

class HandshakeWatch {
 public:
  // `curve`: whether `socket` uses CURVE (it shapes the advice in the messages).
  HandshakeWatch(zmq::context_t& context, zmq::socket_t& socket, std::string endpoint, bool curve);
  HandshakeWatch(HandshakeWatch&&) = default;

  zmq::pollitem_t pollitem();
  // Reads the events that arrived; a message when a handshake failed since the last call.
  std::optional<std::string> Check();
  // Whether any handshake completed: a timeout with none suggests a wrong server key.
  bool succeeded() const { return succeeded_; }
  // Handshakes completed so far: more than one means the socket reconnected (the peer restarted,
  // or the connection broke), and replies owed on the old connection will not come.
  int successes() const { return successes_; }

 private:
  zmq::socket_t events_;
  std::string endpoint_;
  bool curve_ = false, succeeded_ = false;
  int successes_ = 0;
};

}  // namespace kernelgym::security
