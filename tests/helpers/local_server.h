// A `pulsebox serve --local` process for tests, and the process helpers it
// is made of: spawn a program with its output in a log, wait for it with a
// timeout.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace pulsebox::testing {

// Spawns `argv` with `env` added to this process's environment, stdin from
// /dev/null, stdout and stderr appended to `log`. Returns the pid, or -1.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::filesystem::path& log);

// Waits for `pid` up to `timeout`: its exit code (128+N for signal N), or -1
// when it still runs.
int wait_for(pid_t pid, std::chrono::milliseconds timeout);
// wait_for(), and a process still running after `timeout` is killed
// (SIGKILL) and reaped: -1 then. Nothing is left behind either way.
int wait_or_kill(pid_t pid, std::chrono::milliseconds timeout);

// `pulsebox serve --local --verbose` on the state directory `env` names.
// Stopped (SIGTERM, then waited for) on destruction.
class LocalServer {
 public:
  LocalServer() = default;
  LocalServer(const LocalServer&) = delete;
  LocalServer& operator=(const LocalServer&) = delete;
  ~LocalServer();

  // Starts it and waits until `socket` exists. "" or what went wrong.
  std::string start(const std::string& binary, const std::vector<std::string>& env,
                    const std::filesystem::path& socket, const std::filesystem::path& log,
                    const std::vector<std::string>& extra_args = {});
  // SIGTERM, then waits: its exit code, or -1 if it did not end in 30 s.
  int stop();
  // Still running (not exited, not killed).
  bool alive() const;
  pid_t pid() const { return pid_; }
  std::string log() const;
  // Runs the server's log reports ("pulsebox serve: run in").
  int served_runs() const;

 private:
  pid_t pid_ = -1;
  std::filesystem::path log_;
};

}  // namespace pulsebox::testing
