// The OCI runtime's log (--log, --log-format, --log-level, --debug). Engines
// read it: containerd takes the last error of a --log-format json file,
// whose lines are logrus's {"level","msg","time"}. Without --log the lines go
// to stderr. Warnings never go to stderr when a --log is given: go-runc
// reads stdout and stderr combined, so `state` must print nothing else.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "core/unique_fd.h"

namespace pulsebox::oci {

enum class LogLevel { Debug, Info, Warn, Error };

class Log {
 public:
  // --log FILE (append; "" = stderr), --log-format text|json, --log-level.
  core::Status configure(const std::string& path, std::string_view format, std::string_view level,
                         bool debug);
  void write(LogLevel level, std::string_view message) const;
  bool to_stderr() const { return !fd_; }

  // "time=... level=error msg=..." or the json line (exposed for the tests).
  static std::string format_line(LogLevel level, std::string_view message, bool json,
                                 std::string_view time);

 private:
  core::UniqueFd fd_;
  bool json_ = false;
  LogLevel threshold_ = LogLevel::Info;
};

}  // namespace pulsebox::oci
