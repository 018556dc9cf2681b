// The exceptions thrown by pulsebox's public API.
//
// Inside the library every fallible operation returns a Result<T> carrying an
// errno, a stage (the subsystem or step that failed) and a context chain (see
// docs/error-handling.md). Only the public facade turns such an Error into one
// of the typed exceptions below; each mirrors an error of the reference design
// so callers can react to the *kind* of failure:
//
//   SandboxConfigError               bad input: a policy file, a size, a path
//   SandboxUnavailableError          no backend that may run the command
//   SandboxUnsupportedPolicyError    a policy this host cannot enforce strongly
//   SandboxSecurityError             a request that would break isolation
//   SandboxResourceError             a limit was reached (staged bytes, ...)
//   SandboxConcurrentModificationError  the workspace changed under a commit
//   SandboxRecoveryError             leftovers need `pulsebox reconcile`
//   PolicyDenied                     the action policy said DENY
//
// All derive from SandboxError, which derives from std::runtime_error, so
// `catch (const pulsebox::SandboxError&)` catches every library failure.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pulsebox/export.h"

namespace pulsebox {

class PULSEBOX_API SandboxError : public std::runtime_error {
 public:
  explicit SandboxError(const std::string& message, int error_number = 0, std::string stage = {})
      : std::runtime_error(message), error_number_(error_number), stage_(std::move(stage)) {}

  // The errno behind the failure, or 0 when it was not a system call.
  int error_number() const noexcept { return error_number_; }
  // The subsystem or step that failed, e.g. "policy", "audit", "path".
  const std::string& stage() const noexcept { return stage_; }

 private:
  int error_number_;
  std::string stage_;
};

#define PULSEBOX_DECLARE_ERROR(Name)              \
  class PULSEBOX_API Name : public SandboxError { \
   public:                                        \
    using SandboxError::SandboxError;             \
  }

PULSEBOX_DECLARE_ERROR(SandboxConfigError);
PULSEBOX_DECLARE_ERROR(SandboxUnavailableError);
PULSEBOX_DECLARE_ERROR(SandboxUnsupportedPolicyError);
PULSEBOX_DECLARE_ERROR(SandboxSecurityError);
PULSEBOX_DECLARE_ERROR(SandboxResourceError);
PULSEBOX_DECLARE_ERROR(SandboxRecoveryError);
PULSEBOX_DECLARE_ERROR(PolicyDenied);

#undef PULSEBOX_DECLARE_ERROR

// The workspace changed underneath a commit; paths() names every conflict.
class PULSEBOX_API SandboxConcurrentModificationError : public SandboxError {
 public:
  SandboxConcurrentModificationError(const std::string& message, std::vector<std::string> paths)
      : SandboxError(message, 0, "commit"), paths_(std::move(paths)) {}
  const std::vector<std::string>& paths() const noexcept { return paths_; }

 private:
  std::vector<std::string> paths_;
};

}  // namespace pulsebox
