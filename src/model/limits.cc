#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/text.h"
#include "core/throw_error.h"
#include "model/limits_parse.h"

namespace pulsebox::model {

using core::Error;
using core::ErrorKind;

namespace {

Error invalid(std::string_view what, std::string_view text, const std::string& expected) {
  return Error(ErrorKind::kInvalidInput, "limits",
               std::string(what) + ": \"" + std::string(text) + "\" is not valid (expected " +
                   expected + ")");
}

// Parses a non-negative decimal number ("12", "1.5"); returns the rest.
std::optional<std::pair<double, std::string_view>> leading_number(std::string_view text) {
  std::size_t end = 0;
  bool seen_digit = false;
  bool seen_dot = false;
  while (end < text.size()) {
    const char c = text[end];
    if (c >= '0' && c <= '9') {
      seen_digit = true;
    } else if (c == '.' && !seen_dot) {
      seen_dot = true;
    } else {
      break;
    }
    ++end;
  }
  if (!seen_digit) return std::nullopt;
  double value = 0;
  // std::from_chars for double is in libstdc++ 11+.
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + end, value);
  if (ec != std::errc() || ptr != text.data() + end) return std::nullopt;
  return std::make_pair(value, text.substr(end));
}

}  // namespace

core::Result<std::uint64_t> parse_size(std::string_view text, std::string_view what) {
  static const std::string kExpected =
      "a size in bytes, or a number with K, M, G or T, e.g. 512M or 1.5G";
  const auto number = leading_number(text);
  if (!number) return invalid(what, text, kExpected);
  const std::string suffix = core::ascii_lower(number->second);
  double multiplier = 0;
  if (suffix.empty() || suffix == "b") {
    multiplier = 1;
  } else {
    const char unit = suffix[0];
    const std::string_view rest = std::string_view(suffix).substr(1);
    if (!(rest.empty() || rest == "b" || rest == "i" || rest == "ib")) {
      return invalid(what, text, kExpected);
    }
    switch (unit) {
      case 'k':
        multiplier = 1024.0;
        break;
      case 'm':
        multiplier = 1024.0 * 1024;
        break;
      case 'g':
        multiplier = 1024.0 * 1024 * 1024;
        break;
      case 't':
        multiplier = 1024.0 * 1024 * 1024 * 1024;
        break;
      default:
        return invalid(what, text, kExpected);
    }
  }
  const double bytes = std::floor(number->first * multiplier);
  if (bytes < 1) return invalid(what, text, "a size greater than zero");
  if (bytes >= 18446744073709551615.0) return invalid(what, text, "a size below 16 EiB");
  if (multiplier == 1 && std::floor(number->first) != number->first) {
    return invalid(what, text, "a whole number of bytes");
  }
  return static_cast<std::uint64_t>(bytes);
}

core::Result<double> parse_duration_seconds(std::string_view text, std::string_view what) {
  static const std::string kExpected = "a number of seconds, e.g. 30, 1.5 or 2s";
  const auto number = leading_number(text);
  if (!number || !(number->second.empty() || number->second == "s")) {
    return invalid(what, text, kExpected);
  }
  if (!(number->first > 0) || !std::isfinite(number->first)) {
    return invalid(what, text, "a duration greater than zero");
  }
  return number->first;
}

core::Status validate(const ResourcePolicy& policy) {
  auto positive = [](std::string_view field, double value) -> core::Status {
    if (value > 0 && std::isfinite(value)) return core::ok_status();
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%g", value);
    return Error(
        ErrorKind::kInvalidInput, "limits",
        "resource policy: " + std::string(field) + " must be greater than zero, got " + buffer);
  };
  PB_CHECK(positive("cpu_quota_percent", policy.cpu_quota_percent));
  if (policy.cpu_time_seconds) PB_CHECK(positive("cpu_time_seconds", *policy.cpu_time_seconds));
  PB_CHECK(positive("memory_bytes", static_cast<double>(policy.memory_bytes)));
  if (policy.swap_bytes) PB_CHECK(positive("swap_bytes", static_cast<double>(*policy.swap_bytes)));
  if (policy.disk_bytes) PB_CHECK(positive("disk_bytes", static_cast<double>(*policy.disk_bytes)));
  PB_CHECK(positive("max_processes", static_cast<double>(policy.max_processes)));
  PB_CHECK(positive("max_open_files", static_cast<double>(policy.max_open_files)));
  PB_CHECK(positive("max_output_bytes", static_cast<double>(policy.max_output_bytes)));
  PB_CHECK(positive("wall_time_seconds", policy.wall_time_seconds));
  PB_CHECK(positive("termination_grace_seconds", policy.termination_grace_seconds));
  if (policy.working_directory_bytes) {
    PB_CHECK(
        positive("working_directory_bytes", static_cast<double>(*policy.working_directory_bytes)));
  }
  return core::ok_status();
}

}  // namespace pulsebox::model

namespace pulsebox {

void ResourcePolicy::validate() const {
  core::check_or_throw(model::validate(*this));
}

std::uint64_t parse_size(std::string_view text, std::string_view what) {
  return core::value_or_throw(model::parse_size(text, what));
}

double parse_duration_seconds(std::string_view text, std::string_view what) {
  return core::value_or_throw(model::parse_duration_seconds(text, what));
}

std::string format_size(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char buffer[32];
  if (unit == 0) {
    std::snprintf(buffer, sizeof buffer, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buffer, sizeof buffer, "%.4g %s", value, kUnits[unit]);
  }
  return buffer;
}

}  // namespace pulsebox
