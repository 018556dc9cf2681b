#include <cstring>

#include "core/result.h"
#include "core/throw_error.h"
#include "pulsebox/error.h"

namespace pulsebox::core {

std::string Error::to_string() const {
  std::string out;
  for (auto it = context_.rbegin(); it != context_.rend(); ++it) {
    out += *it;
    out += ": ";
  }
  out += message_;
  if (error_number_ != 0) {
    out += ": ";
    out += std::strerror(error_number_);
  }
  return out;
}

void throw_error(const Error& error) {
  const std::string text = error.to_string();
  const int err = error.error_number();
  const std::string& stage = error.stage();
  switch (error.kind()) {
    case ErrorKind::kInvalidInput:
      throw SandboxConfigError(text, err, stage);
    case ErrorKind::kUnavailable:
      throw SandboxUnavailableError(text, err, stage);
    case ErrorKind::kUnsupported:
      throw SandboxUnsupportedPolicyError(text, err, stage);
    case ErrorKind::kSecurity:
      throw SandboxSecurityError(text, err, stage);
    case ErrorKind::kResource:
      throw SandboxResourceError(text, err, stage);
    case ErrorKind::kConcurrentModification:
      throw SandboxConcurrentModificationError(text, error.paths());
    case ErrorKind::kRecovery:
      throw SandboxRecoveryError(text, err, stage);
    case ErrorKind::kPolicyDenied:
      throw PolicyDenied(text, err, stage);
    case ErrorKind::kIo:
    case ErrorKind::kInternal:
      break;
  }
  throw SandboxError(text, err, stage);
}

}  // namespace pulsebox::core
