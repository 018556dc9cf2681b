#include "helpers/bounded_cli.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "helpers/test_support.h"

extern char** environ;

namespace pulsebox::testing {

BoundedRun run_cli_bounded(const std::vector<std::string>& args,
                           const std::vector<std::string>& extra_env, Bounds bounds) {
  BoundedRun result;
  const char* binary = std::getenv("PULSEBOX_BIN");
  if (binary == nullptr) {
    ADD_FAILURE() << "PULSEBOX_BIN is not set (meson sets it)";
    return result;
  }
  TempDir scratch;
  const std::filesystem::path out = scratch / "out", err = scratch / "err";
  // Everything the child needs is made before fork: it only makes syscalls.
  std::vector<std::string> env_storage;
  auto set = [&](const std::string& entry) {
    const std::string name = entry.substr(0, entry.find('=') + 1);
    std::erase_if(env_storage, [&](const std::string& e) { return e.rfind(name, 0) == 0; });
    env_storage.push_back(entry);
  };
  for (char** e = environ; *e != nullptr; ++e)
    set(*e);
  for (const auto& entry : extra_env)
    set(entry);
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  const std::vector<char*> argv = c_strings(argv_storage);
  const std::vector<char*> envp = c_strings(env_storage);
  const rlimit cap{bounds.max_address_space, bounds.max_address_space};

  const pid_t pid = ::fork();
  if (pid == 0) {
    const int in = ::open("/dev/null", O_RDONLY);
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (::setrlimit(RLIMIT_AS, &cap) != 0 || in < 0 || o < 0 || e < 0 || ::dup2(in, 0) < 0 ||
        ::dup2(o, 1) < 0 || ::dup2(e, 2) < 0) {
      ::_exit(127);
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    return result;
  }
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + bounds.deadline;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      result.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(out);
  result.err = read_file(err);
  return result;
}

}  // namespace pulsebox::testing
