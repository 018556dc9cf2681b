// What config.json may say that pulsebox oci refuses, and why: one table,
// read by the config reader (its messages), `features` (the
// org.pulsebox.refused annotation) and docs/oci.md, so the three agree.
//
// A row's `path` is a JSON path with `[]` for any index. Rows of kind Key
// are refused whenever the key is present; rows of kind Value name a value
// of a supported key ("linux.namespaces[].type=time"), refused where that
// key is read.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "core/result.h"

namespace pulsebox::oci::spec {

struct Refusal {
  enum class Kind { Key, Value };
  Kind kind = Kind::Key;
  std::string_view path;
  std::string_view why;  // "no LSM support: ..."
  std::string_view fix;  // "remove it from the config"
};

std::span<const Refusal> refusals();

// The row for a key at `pattern` (indices written as []), if it is refused.
const Refusal* find_refusal(std::string_view pattern);

// "<source>: <path>: not supported: <why>; <fix>", kUnsupported.
core::Error refusal_error(const Refusal& row, std::string_view source, std::string_view path);

}  // namespace pulsebox::oci::spec
