#include "env/client/errors.h"

namespace kernelgym::client {

ServerError::ServerError(const std::string& op, protocol::Error error)
    : ClientError(op + ": " + std::string(protocol::ErrorCodeName(error.code)) + ": " + error.message),
      error_(std::move(error)) {}

}  // namespace kernelgym::client
