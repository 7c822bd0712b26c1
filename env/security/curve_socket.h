// Putting keys on ZeroMQ sockets (keys.h loads them).
#pragma once

#include <string>
#include <zmq.hpp>

#include "env/security/keys.h"

namespace kernelgym::security {

void ApplyCurveClient(zmq::socket_t& socket, const CurveClientKeys& keys);
// The server side of a socket: CURVE with this secret key; ZAP requests carry `zap_domain`. A
// ZapHandler must be running in the socket's context before it binds.
void ApplyCurveServer(zmq::socket_t& socket, const KeyPair& server, const std::string& zap_domain);

}  // namespace kernelgym::security
