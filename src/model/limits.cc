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

namespace {

const std::string kSizeGrammar =
    "a size in bytes, or a number with K, M, G or T, e.g. 512M or 1.5G";

// The factor of a size's unit ("", "b", "k", "KiB", "MB", ...), or 0.
double size_multiplier(std::string_view unit_text) {
  const std::string suffix = core::ascii_lower(unit_text);
  if (suffix.empty() || suffix == "b") return 1;
  const std::string_view rest = std::string_view(suffix).substr(1);
  if (!(rest.empty() || rest == "b" || rest == "i" || rest == "ib")) return 0;
  switch (suffix[0]) {
    case 'k':
      return 1024.0;
    case 'm':
      return 1024.0 * 1024;
    case 'g':
      return 1024.0 * 1024 * 1024;
    case 't':
      return 1024.0 * 1024 * 1024 * 1024;
    default:
      return 0;
  }
}

}  // namespace

core::Result<std::uint64_t> parse_size(std::string_view text, std::string_view what) {
  const auto number = leading_number(text);
  if (!number) return invalid(what, text, kSizeGrammar);
  const double multiplier = size_multiplier(number->second);
  if (multiplier == 0) return invalid(what, text, kSizeGrammar);
  const double bytes = std::floor(number->first * multiplier);
  if (bytes < 1) return invalid(what, text, "a size greater than zero");
  if (bytes >= 18446744073709551615.0) return invalid(what, text, "a size below 16 EiB");
  if (multiplier == 1 && std::floor(number->first) != number->first) {
    return invalid(what, text, "a whole number of bytes");
  }
  return static_cast<std::uint64_t>(bytes);
}

namespace {

const std::string kDurationGrammar =
    "a duration: seconds, or a number with ms, s, m or h, e.g. 500ms, 90s, 15m, 1h";
const std::string kNoLimit = "; 0 or none for no limit";

// The number of seconds in `text` (a unit is optional; bare numbers are
// seconds), or nullopt for anything else. Zero is returned as zero.
std::optional<double> duration_value(std::string_view text) {
  const auto number = leading_number(text);
  if (!number) return std::nullopt;
  const std::string_view unit = number->second;
  double scale = 0;
  if (unit.empty() || unit == "s") {
    scale = 1;
  } else if (unit == "ms") {
    scale = 0.001;
  } else if (unit == "m") {
    scale = 60;
  } else if (unit == "h") {
    scale = 3600;
  } else {
    return std::nullopt;
  }
  const double seconds = number->first * scale;
  if (!std::isfinite(seconds)) return std::nullopt;
  return seconds;
}

bool means_no_limit(std::string_view text) {
  return core::ascii_lower(text) == "none";
}

}  // namespace

core::Result<double> parse_duration_seconds(std::string_view text, std::string_view what) {
  const auto seconds = duration_value(text);
  if (!seconds) return invalid(what, text, kDurationGrammar);
  if (!(*seconds > 0)) return invalid(what, text, "a duration greater than zero");
  return *seconds;
}

core::Result<std::optional<double>> parse_duration_limit(std::string_view text,
                                                         std::string_view what) {
  if (means_no_limit(text)) return std::optional<double>();
  const auto seconds = duration_value(text);
  if (!seconds) return invalid(what, text, kDurationGrammar + kNoLimit);
  if (*seconds == 0) return std::optional<double>();
  return std::optional<double>(*seconds);
}

core::Result<std::optional<std::uint64_t>> parse_size_limit(std::string_view text,
                                                            std::string_view what) {
  if (means_no_limit(text)) return std::optional<std::uint64_t>();
  // "0", "0M": a limit of zero bytes, which the caller gives its meaning.
  if (const auto number = leading_number(text);
      number && number->first == 0 && size_multiplier(number->second) != 0) {
    return std::optional<std::uint64_t>(0);
  }
  if (auto bytes = parse_size(text, what)) return std::optional<std::uint64_t>(*bytes);
  return invalid(what, text, kSizeGrammar + "; none for no limit");
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
  // Zero swap is a real limit: memory only, never swapped out.
  if (policy.disk_bytes) PB_CHECK(positive("disk_bytes", static_cast<double>(*policy.disk_bytes)));
  PB_CHECK(positive("max_processes", static_cast<double>(policy.max_processes)));
  PB_CHECK(positive("max_open_files", static_cast<double>(policy.max_open_files)));
  PB_CHECK(positive("max_output_bytes", static_cast<double>(policy.max_output_bytes)));
  // Infinity is "no wall-clock limit" (kNoWallTimeLimit).
  if (!(policy.wall_time_seconds > 0)) {
    PB_CHECK(positive("wall_time_seconds", policy.wall_time_seconds));
  }
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

std::optional<double> parse_duration_limit(std::string_view text, std::string_view what) {
  return core::value_or_throw(model::parse_duration_limit(text, what));
}

std::optional<std::uint64_t> parse_size_limit(std::string_view text, std::string_view what) {
  return core::value_or_throw(model::parse_size_limit(text, what));
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
