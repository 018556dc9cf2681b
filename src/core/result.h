// Result<T> and Error: the library's internal error convention.
// See docs/error-handling.md for the rules; in short:
//  - functions that can fail return Result<T> (never throw);
//  - an Error carries a kind (which public exception it becomes), the errno,
//    the stage that failed and a chain of context added on the way up;
//  - only the public facade converts an Error into an exception
//    (core/throw_error.h).
#pragma once

#include <cerrno>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace pulsebox::core {

enum class ErrorKind {
  kInvalidInput,            // -> SandboxConfigError
  kIo,                      // -> SandboxError
  kUnavailable,             // -> SandboxUnavailableError
  kUnsupported,             // -> SandboxUnsupportedPolicyError
  kSecurity,                // -> SandboxSecurityError
  kResource,                // -> SandboxResourceError
  kConcurrentModification,  // -> SandboxConcurrentModificationError
  kRecovery,                // -> SandboxRecoveryError
  kPolicyDenied,            // -> PolicyDenied
  kInternal,                // -> SandboxError
};

class Error {
 public:
  Error(ErrorKind kind, std::string stage, std::string message, int error_number = 0)
      : kind_(kind),
        stage_(std::move(stage)),
        message_(std::move(message)),
        error_number_(error_number) {}

  // An Error for a failed system call; `err` defaults to the current errno.
  static Error from_errno(std::string stage, std::string message, int err = errno) {
    return Error(ErrorKind::kIo, std::move(stage), std::move(message), err);
  }

  // Adds an outer layer of context ("loading policy /x/p.json").
  Error& with_context(std::string what) & {
    context_.push_back(std::move(what));
    return *this;
  }
  Error&& with_context(std::string what) && {
    context_.push_back(std::move(what));
    return std::move(*this);
  }
  Error&& with_kind(ErrorKind kind) && {
    kind_ = kind;
    return std::move(*this);
  }

  ErrorKind kind() const { return kind_; }
  const std::string& stage() const { return stage_; }
  const std::string& message() const { return message_; }
  int error_number() const { return error_number_; }
  // Innermost first, as added.
  const std::vector<std::string>& context() const { return context_; }
  // Paths involved (used by commit conflicts); may be empty.
  std::vector<std::string>& paths() { return paths_; }
  const std::vector<std::string>& paths() const { return paths_; }

  // "outer: inner: message: strerror(errno)"
  std::string to_string() const;

 private:
  ErrorKind kind_;
  std::string stage_;
  std::string message_;
  int error_number_;
  std::vector<std::string> context_;
  std::vector<std::string> paths_;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value)
      : data_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : data_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool ok() const { return data_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(data_); }
  const T& value() const& { return std::get<0>(data_); }
  T&& value() && { return std::get<0>(std::move(data_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

  Error& error() & { return std::get<1>(data_); }
  const Error& error() const& { return std::get<1>(data_); }
  Error&& error() && { return std::get<1>(std::move(data_)); }

 private:
  std::variant<T, Error> data_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), has_error_(true) {}  // NOLINT

  bool ok() const { return !has_error_; }
  explicit operator bool() const { return ok(); }
  Error& error() & { return error_; }
  const Error& error() const& { return error_; }
  Error&& error() && { return std::move(error_); }

 private:
  Error error_{ErrorKind::kInternal, "", ""};
  bool has_error_ = false;
};

using Status = Result<void>;

inline Status ok_status() {
  return Status();
}

}  // namespace pulsebox::core

// Propagates an error to the caller: PB_TRY(var, expr) declares `var` with the
// value of a successful Result; PB_CHECK(expr) is for Result<void>.
#define PB_CONCAT_INNER(a, b) a##b
#define PB_CONCAT(a, b) PB_CONCAT_INNER(a, b)
#define PB_TRY(var, expr)                                      \
  auto PB_CONCAT(pb_result_, __LINE__) = (expr);               \
  if (!PB_CONCAT(pb_result_, __LINE__).ok())                   \
    return std::move(PB_CONCAT(pb_result_, __LINE__)).error(); \
  auto var = std::move(PB_CONCAT(pb_result_, __LINE__)).value()
#define PB_CHECK(expr)                                          \
  do {                                                          \
    auto pb_status_ = (expr);                                   \
    if (!pb_status_.ok()) return std::move(pb_status_).error(); \
  } while (0)
