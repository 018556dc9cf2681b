// The single place where an internal Error becomes a public exception.
#pragma once

#include <utility>

#include "core/result.h"

namespace pulsebox::core {

[[noreturn]] void throw_error(const Error& error);

// Unwraps a Result at the public API boundary.
template <class T>
T value_or_throw(Result<T>&& result) {
  if (!result.ok()) throw_error(result.error());
  return std::move(result).value();
}

inline void check_or_throw(const Status& status) {
  if (!status.ok()) throw_error(status.error());
}

}  // namespace pulsebox::core
