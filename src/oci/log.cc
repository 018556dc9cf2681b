#include "oci/log.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "oci/invalid_input.h"
#include "oci/state_store.h"

namespace pulsebox::oci {

namespace {

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::Debug:
      return "debug";
    case LogLevel::Info:
      return "info";
    case LogLevel::Warn:
      return "warning";
    case LogLevel::Error:
      return "error";
  }
  return "error";
}

}  // namespace

core::Status Log::configure(const std::string& path, std::string_view format,
                            std::string_view level, bool debug) {
  if (format == "json") {
    json_ = true;
  } else if (format != "text" && !format.empty()) {
    return invalid("--log-format " + std::string(format) + ": give text or json");
  }
  if (level.empty()) {
    threshold_ = debug ? LogLevel::Debug : LogLevel::Info;
  } else if (level == "debug") {
    threshold_ = LogLevel::Debug;
  } else if (level == "info") {
    threshold_ = LogLevel::Info;
  } else if (level == "warn" || level == "warning") {
    threshold_ = LogLevel::Warn;
  } else if (level == "error") {
    threshold_ = LogLevel::Error;
  } else {
    return invalid("--log-level " + std::string(level) + ": give debug, info, warn or error");
  }
  if (!path.empty()) {
    fd_.reset(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600));
    if (!fd_) return core::Error::from_errno("oci", "--log " + path + ": opening it");
  }
  return core::ok_status();
}

std::string Log::format_line(LogLevel level, std::string_view message, bool json,
                             std::string_view time) {
  if (json) {
    return nlohmann::json{
               {"level", level_name(level)}, {"msg", std::string(message)}, {"time", time}}
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
           "\n";
  }
  // logrus's text format quotes with Go's %q; a JSON string is the same for
  // the text pulsebox writes.
  return "time=\"" + std::string(time) + "\" level=" + level_name(level) + " msg=" +
         nlohmann::json(std::string(message))
             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

void Log::write(LogLevel level, std::string_view message) const {
  if (level < threshold_) return;
  const std::string line = format_line(level, message, json_, rfc3339_now());
  (void)core::write_all(fd_ ? fd_.get() : STDERR_FILENO, line, "the log");
}

}  // namespace pulsebox::oci
