// Reading one JSON object of config.json so that nothing in it goes unread:
// each take() marks its key consumed, and finish() refuses whatever is left,
// a key in the refusal table with that row's reason, any other by name.
//
//   FieldReader reader(ctx, json_object, "linux.resources", "linux.resources");
//   PB_TRY(limit, reader.i64("limit"));   // std::optional<std::int64_t>
//   PB_CHECK(reader.finish());
//
// `path` is what errors show ("mounts[2]"); `pattern` is the same path with
// indices written as [] ("mounts[]"), to look rows up in spec_refusals.h.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace pulsebox::oci::spec {

// Where the text came from ("config.json", or exec's --process file).
struct ReadContext {
  std::string source;
};

class FieldReader {
 public:
  // Checks that `value` is an object (else error() from the constructor).
  FieldReader(const ReadContext& ctx, const nlohmann::json& value, std::string path,
              std::string pattern);

  const std::string& path() const { return path_; }
  const std::string& pattern() const { return pattern_; }
  std::string child_path(std::string_view key) const;
  std::string child_pattern(std::string_view key) const;

  // Not an object, reported on the first use.
  core::Status status() const;

  // The value at `key` (nullptr when absent or null), now consumed.
  const nlohmann::json* take(std::string_view key);

  core::Result<std::optional<std::string>> string(std::string_view key);
  core::Result<std::optional<bool>> boolean(std::string_view key);
  core::Result<std::optional<std::uint64_t>> u64(std::string_view key,
                                                 std::uint64_t max = UINT64_MAX);
  core::Result<std::optional<std::int64_t>> i64(std::string_view key);
  core::Result<std::vector<std::string>> strings(std::string_view key);

  // The keys left unread: a refused one with its reason, else "unknown key".
  core::Status finish() const;

  // "<source>: <path>: <why>; <fix>" (kInvalidInput).
  core::Error error(std::string_view path, std::string_view why, std::string_view fix) const;

 private:
  const ReadContext& ctx_;
  const nlohmann::json& value_;
  std::string path_, pattern_;
  std::set<std::string, std::less<>> consumed_;
};

// Free helpers for values that are not an object's members.
core::Error invalid(const ReadContext& ctx, std::string_view path, std::string_view why,
                    std::string_view fix);
core::Result<std::string> as_string(const ReadContext& ctx, const nlohmann::json& value,
                                    std::string_view path);
core::Result<std::uint64_t> as_u64(const ReadContext& ctx, const nlohmann::json& value,
                                   std::string_view path, std::uint64_t max = UINT64_MAX);
core::Result<std::int64_t> as_i64(const ReadContext& ctx, const nlohmann::json& value,
                                  std::string_view path);
// Whether `path` has a ".." component. Paths inside the container are
// resolved in its root whatever they say, but one that climbs is never what
// a config means, so it is refused rather than reinterpreted.
bool has_dot_dot(std::string_view path);

// Checks `value` is an array (null is an empty one).
core::Status expect_array(const ReadContext& ctx, const nlohmann::json* value,
                          std::string_view path);

}  // namespace pulsebox::oci::spec
