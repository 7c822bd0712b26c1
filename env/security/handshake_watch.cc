#include "env/security/handshake_watch.h"

#include <atomic>
#include <cstring>

namespace kernelgym::security {

HandshakeWatch::HandshakeWatch(zmq::context_t& context, zmq::socket_t& socket, std::string endpoint, bool curve)
    : events_(context, zmq::socket_type::pair), endpoint_(std::move(endpoint)), curve_(curve) {
  static std::atomic<uint64_t> next{0};
  const std::string address = "inproc://kernelgym-handshake-" + std::to_string(next++);
  if (zmq_socket_monitor(socket.handle(), address.c_str(),
                         ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0)
    throw zmq::error_t();
  events_.set(zmq::sockopt::linger, 0);
  events_.connect(address);
}

zmq::pollitem_t HandshakeWatch::pollitem() { return {events_.handle(), 0, ZMQ_POLLIN, 0}; }

std::optional<std::string> HandshakeWatch::Check() {
  std::optional<std::string> failure;
  while (true) {
    zmq::message_t event, address;
    if (!events_.recv(event, zmq::recv_flags::dontwait)) break;
    if (event.more()) (void)events_.recv(address, zmq::recv_flags::dontwait);
    if (event.size() < 6) continue;
    uint16_t id;
    uint32_t value;
    std::memcpy(&id, event.data(), 2);
    std::memcpy(&value, static_cast<const char*>(event.data()) + 2, 4);
    if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      succeeded_ = true;
      ++successes_;
      continue;
    }
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      failure = endpoint_ + " refused this side's key (ZAP status " + std::to_string(value) +
                "): its public key is not on the server's allow-list (docs/security.md)";
    } else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
      failure = curve_ ? "the CURVE handshake with " + endpoint_ + " failed (protocol error " + std::to_string(value) +
                             "): the server does not speak CURVE, or the server key is wrong"
                       : endpoint_ + " requires CURVE (protocol error " + std::to_string(value) +
                             "): give the server's public key and this side's key pair (KERNELGYM_SERVER_KEY and "
                             "KERNELGYM_CLIENT_KEY, or KERNELGYM_RUNNER_KEY for a runner; docs/security.md)";
    } else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
      failure = "the handshake with " + endpoint_ + " failed (" + std::strerror(static_cast<int>(value)) + "): " +
                (curve_ ? "is the server's public key right, and does the server use CURVE?"
                        : "the server probably requires CURVE: give the server's public key and this side's key pair "
                          "(KERNELGYM_SERVER_KEY and KERNELGYM_CLIENT_KEY, or KERNELGYM_RUNNER_KEY for a runner; "
                          "docs/security.md)");
    }
  }
  return failure;
}

}  // namespace kernelgym::security
