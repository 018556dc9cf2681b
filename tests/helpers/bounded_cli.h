// Runs the pulsebox binary ($PULSEBOX_BIN) for attacks that made it hang or
// eat memory: killed after a deadline, its address space capped, its output
// in files (no pipe to fill). A regression then fails its test instead of
// hanging the suite or exhausting the machine. (The address-space cap does
// not suit sanitizer builds, which the suites using this are not part of.)
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace pulsebox::testing {

struct BoundedRun {
  int exit_code = -1;  // 128+N when killed by signal N
  bool timed_out = false;
  std::string out;
  std::string err;
};

struct Bounds {
  std::chrono::seconds deadline{10};
  unsigned long long max_address_space = 1ull << 30;
};

// `extra_env` entries (NAME=VALUE) are added to this process's environment
// (a later entry of the same name wins).
BoundedRun run_cli_bounded(const std::vector<std::string>& args,
                           const std::vector<std::string>& extra_env = {}, Bounds bounds = {});

}  // namespace pulsebox::testing
