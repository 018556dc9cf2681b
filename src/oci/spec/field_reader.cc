#include "oci/spec/field_reader.h"

#include <algorithm>

#include "oci/invalid_input.h"
#include "oci/spec/spec_refusals.h"

namespace pulsebox::oci::spec {

using json = nlohmann::json;

namespace {

std::string type_name(const json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number_unsigned()) return "a non-negative integer";
  if (value.is_number_integer()) return "a negative integer";
  if (value.is_number_float()) return "a fractional number";
  if (value.is_string()) return "a string";
  if (value.is_array()) return "an array";
  return "an object";
}

core::Error wrong_type(const ReadContext& ctx, std::string_view path, std::string_view expected,
                       const json& value) {
  return invalid(ctx, path, "expected " + std::string(expected) + ", got " + type_name(value),
                 "correct the value's type");
}

}  // namespace

core::Error invalid(const ReadContext& ctx, std::string_view path, std::string_view why,
                    std::string_view fix) {
  return oci::invalid(ctx.source + ": " + std::string(path.empty() ? "the document" : path) + ": " +
                      std::string(why) + "; " + std::string(fix));
}

core::Result<std::string> as_string(const ReadContext& ctx, const json& value,
                                    std::string_view path) {
  if (!value.is_string()) return wrong_type(ctx, path, "a string", value);
  return value.get<std::string>();
}

core::Result<std::uint64_t> as_u64(const ReadContext& ctx, const json& value, std::string_view path,
                                   std::uint64_t max) {
  if (!value.is_number_unsigned()) return wrong_type(ctx, path, "a non-negative integer", value);
  const auto number = value.get<std::uint64_t>();
  if (number > max) {
    return invalid(ctx, path,
                   std::to_string(number) + " is over the limit of " + std::to_string(max),
                   "give a smaller value");
  }
  return number;
}

core::Result<std::int64_t> as_i64(const ReadContext& ctx, const json& value,
                                  std::string_view path) {
  if (value.is_number_unsigned()) {
    if (value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      return invalid(ctx, path, "out of the range of a signed 64-bit integer",
                     "give a smaller value");
    }
    return static_cast<std::int64_t>(value.get<std::uint64_t>());
  }
  if (!value.is_number_integer()) return wrong_type(ctx, path, "an integer", value);
  return value.get<std::int64_t>();
}

bool has_dot_dot(std::string_view path) {
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find('/', start), path.size());
    if (path.substr(start, end - start) == "..") return true;
    start = end + 1;
  }
  return false;
}

core::Status expect_array(const ReadContext& ctx, const json* value, std::string_view path) {
  if (value != nullptr && !value->is_array()) return wrong_type(ctx, path, "an array", *value);
  return {};
}

FieldReader::FieldReader(const ReadContext& ctx, const json& value, std::string path,
                         std::string pattern)
    : ctx_(ctx), value_(value), path_(std::move(path)), pattern_(std::move(pattern)) {}

std::string FieldReader::child_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

std::string FieldReader::child_pattern(std::string_view key) const {
  return pattern_.empty() ? std::string(key) : pattern_ + "." + std::string(key);
}

core::Status FieldReader::status() const {
  if (!value_.is_object()) return wrong_type(ctx_, path_, "an object", value_);
  return {};
}

const json* FieldReader::take(std::string_view key) {
  if (!value_.is_object()) return nullptr;
  auto it = value_.find(key);
  if (it == value_.end()) return nullptr;
  consumed_.emplace(key);
  return it->is_null() ? nullptr : &*it;
}

core::Result<std::optional<std::string>> FieldReader::string(std::string_view key) {
  const json* value = take(key);
  if (value == nullptr) return std::optional<std::string>();
  PB_TRY(text, as_string(ctx_, *value, child_path(key)));
  return std::optional<std::string>(std::move(text));
}

core::Result<std::optional<bool>> FieldReader::boolean(std::string_view key) {
  const json* value = take(key);
  if (value == nullptr) return std::optional<bool>();
  if (!value->is_boolean()) return wrong_type(ctx_, child_path(key), "a boolean", *value);
  return std::optional<bool>(value->get<bool>());
}

core::Result<std::optional<std::uint64_t>> FieldReader::u64(std::string_view key,
                                                            std::uint64_t max) {
  const json* value = take(key);
  if (value == nullptr) return std::optional<std::uint64_t>();
  PB_TRY(number, as_u64(ctx_, *value, child_path(key), max));
  return std::optional<std::uint64_t>(number);
}

core::Result<std::optional<std::int64_t>> FieldReader::i64(std::string_view key) {
  const json* value = take(key);
  if (value == nullptr) return std::optional<std::int64_t>();
  PB_TRY(number, as_i64(ctx_, *value, child_path(key)));
  return std::optional<std::int64_t>(number);
}

core::Result<std::vector<std::string>> FieldReader::strings(std::string_view key) {
  const json* value = take(key);
  std::vector<std::string> out;
  if (value == nullptr) return out;
  const std::string path = child_path(key);
  if (!value->is_array()) return wrong_type(ctx_, path, "an array of strings", *value);
  for (std::size_t i = 0; i < value->size(); ++i) {
    PB_TRY(text, as_string(ctx_, (*value)[i], path + "[" + std::to_string(i) + "]"));
    out.push_back(std::move(text));
  }
  return out;
}

core::Status FieldReader::finish() const {
  PB_CHECK(status());
  for (const auto& [key, value] : value_.items()) {
    if (consumed_.contains(key)) continue;
    if (const Refusal* row = find_refusal(child_pattern(key)); row != nullptr) {
      return refusal_error(*row, ctx_.source, child_path(key));
    }
  }
  for (const auto& [key, value] : value_.items()) {
    if (consumed_.contains(key)) continue;
    return invalid(ctx_, child_path(key), "unknown key (not in runtime-spec 1.2.1 for Linux)",
                   "remove it or correct its name");
  }
  return {};
}

core::Error FieldReader::error(std::string_view path, std::string_view why,
                               std::string_view fix) const {
  return invalid(ctx_, path, why, fix);
}

}  // namespace pulsebox::oci::spec
