// Runs the pulsebox binary ($PULSEBOX_BIN, set by meson) as a user would.
#pragma once

#include <string>
#include <vector>

namespace pulsebox::testing {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Feeds `input` on stdin; `extra_env` entries (NAME=VALUE) are added to the
// environment (a later entry of the same name wins); `cwd`, when not empty,
// is the working directory.
// Everything `fd` gives until end of file.
std::string drain(int fd);

CliRun run_cli(const std::vector<std::string>& args, const std::string& input = "",
               const std::vector<std::string>& extra_env = {}, const std::string& cwd = "");

}  // namespace pulsebox::testing
