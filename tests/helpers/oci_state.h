// For tests of the OCI runtime's state commands: a `sleep` child of the test
// standing in for a container's process, and state records naming it,
// written by the test itself under a --root of its own.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/unique_fd.h"
#include "helpers/cli_runner.h"
#include "oci/state_store.h"

namespace pulsebox::testing {

// `sleep 60`, killed and reaped when this goes (if still there).
class SleepChild {
 public:
  SleepChild();
  ~SleepChild();
  SleepChild(const SleepChild&) = delete;
  SleepChild& operator=(const SleepChild&) = delete;

  pid_t pid() const { return pid_; }
  // Still running (not exited, not a zombie).
  bool alive() const;
  // Reaps it (bounded wait): the signal that ended it, 0 if it exited,
  // -1 if it did not end in time.
  int wait_for_signal();

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// Writes <root>/<id>/{lock,state.json} as create would for a created
// container whose process is `pid` with `start_time` (+ exec.fifo when
// `with_fifo`, its read end held open by this process as the container's
// process would while it waits for start: in *fifo_reader when given, else
// for the rest of the test); no lock is left held.
void write_oci_record(const std::filesystem::path& root, const std::string& id, pid_t pid,
                      std::uint64_t start_time, bool with_fifo = false,
                      const std::vector<std::string>& cgroup_leaves = {},
                      core::UniqueFd* fifo_reader = nullptr);

// `pulsebox oci --root ROOT args...`.
CliRun run_oci(const std::filesystem::path& root, const std::vector<std::string>& args,
               const std::vector<std::string>& extra_env = {});

}  // namespace pulsebox::testing
