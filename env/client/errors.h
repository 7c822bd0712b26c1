// What the C++ client throws. Three kinds, because a caller reacts to each differently:
//   ServerError    the server answered with an error reply (docs/protocol.md, "Error codes"):
//                  the request was read and refused; re-sending it unchanged gets the same answer
//                  (except OVERLOADED, whose details.retry_after_s says when to try again).
//   TransportError no answer: the server is unreachable, or did not reply within the request
//                  timeout (after the retries, for the ops that are retried). Whether a
//                  non-idempotent request (env.*) was applied is unknown.
//                  AuthError (a TransportError): the server refused the handshake (CURVE:
//                  docs/security.md); the message says why.
//   ProtocolError  an answer that is not a valid reply or whose result does not have the op's
//                  format (a server bug, or a server speaking another protocol version).
// All derive from ClientError, so `catch (const ClientError&)` catches every client failure.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

#include "env/protocol/messages.h"

namespace kernelgym::client {

class ClientError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ServerError : public ClientError {
 public:
  // `op` is the request's op; what() reads "<op>: <CODE>: <message>".
  ServerError(const std::string& op, protocol::Error error);

  protocol::ErrorCode code() const { return error_.code; }
  const std::string& message() const { return error_.message; }
  const std::map<std::string, std::string>& details() const { return error_.details; }
  const protocol::Error& error() const { return error_; }

 private:
  protocol::Error error_;
};

class TransportError : public ClientError {
 public:
  using ClientError::ClientError;
};

class AuthError : public TransportError {
 public:
  using TransportError::TransportError;
};

class ProtocolError : public ClientError {
 public:
  // `id`: the request the bad reply answers, 0 when it could not be told.
  ProtocolError(const std::string& what, uint64_t id = 0) : ClientError(what), id_(id) {}
  uint64_t id() const { return id_; }

 private:
  uint64_t id_;
};

}  // namespace kernelgym::client
