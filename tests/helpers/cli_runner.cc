#include "helpers/cli_runner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers/test_support.h"

extern char** environ;

namespace pulsebox::testing {

std::string drain(int fd) {
  std::string data;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0)
    data.append(buffer, static_cast<size_t>(n));
  return data;
}

namespace {}  // namespace

// Runs build/src/cli/pulsebox with `args`, feeding `input` on stdin.
CliRun run_cli(const std::vector<std::string>& args, const std::string& input,
               const std::vector<std::string>& extra_env, const std::string& cwd) {
  const char* binary = std::getenv("PULSEBOX_BIN");
  if (binary == nullptr) {
    ADD_FAILURE() << "PULSEBOX_BIN is not set (meson sets it)";
    return {};
  }
  int in_pipe[2], out_pipe[2], err_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0 || ::pipe2(out_pipe, O_CLOEXEC) != 0 ||
      ::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe failed";
    return {};
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  const std::vector<char*> argv = c_strings(argv_storage);
  std::vector<std::string> env_storage;
  auto overridden = [&](const std::string& entry) {
    const std::string name = entry.substr(0, entry.find('=') + 1);
    for (const auto& extra : extra_env) {
      if (extra.rfind(name, 0) == 0) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e) {
    if (!overridden(*e)) env_storage.emplace_back(*e);
  }
  env_storage.insert(env_storage.end(), extra_env.begin(), extra_env.end());
  const std::vector<char*> envp = c_strings(env_storage);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, binary, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  CliRun run;
  if (rc != 0) {
    ADD_FAILURE() << "cannot spawn " << binary;
    return run;
  }
  // Inputs here are small: write all, then read (no deadlock below pipe size).
  if (!input.empty()) (void)!::write(in_pipe[1], input.data(), input.size());
  ::close(in_pipe[1]);
  run.out = drain(out_pipe[0]);
  run.err = drain(err_pipe[0]);
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

}  // namespace pulsebox::testing
