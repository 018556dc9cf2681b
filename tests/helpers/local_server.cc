#include "helpers/local_server.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "helpers/test_support.h"

extern char** environ;

namespace pulsebox::testing {

using namespace std::chrono_literals;

pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::filesystem::path& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e)
    env_storage.emplace_back(*e);
  env_storage.insert(env_storage.end(), env.begin(), env.end());
  std::vector<std::string> argv_storage = argv;
  const std::vector<char*> envp = c_strings(env_storage);
  const std::vector<char*> args = c_strings(argv_storage);
  pid_t pid = -1;
  if (::posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data()) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

int wait_for(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(10ms);
  }
}

int wait_or_kill(pid_t pid, std::chrono::milliseconds timeout) {
  const int code = wait_for(pid, timeout);
  if (code != -1) return code;
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return -1;
}

LocalServer::~LocalServer() {
  if (pid_ > 0) stop();
}

std::string LocalServer::start(const std::string& binary, const std::vector<std::string>& env,
                               const std::filesystem::path& socket,
                               const std::filesystem::path& log,
                               const std::vector<std::string>& extra_args) {
  log_ = log;
  std::vector<std::string> argv = {binary, "serve", "--local", "--verbose"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  pid_ = spawn(argv, env, log_);
  if (pid_ <= 0) return "cannot spawn " + binary;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!std::filesystem::exists(socket)) {
    if (std::chrono::steady_clock::now() >= deadline) return "no socket after 10 s: " + this->log();
    if (const int status = wait_for(pid_, 0ms); status != -1) {
      pid_ = -1;
      return "the server ended (" + std::to_string(status) + "): " + this->log();
    }
    std::this_thread::sleep_for(5ms);
  }
  return "";
}

int LocalServer::stop() {
  ::kill(pid_, SIGTERM);
  const int status = wait_for(pid_, 30s);
  pid_ = -1;
  return status;
}

bool LocalServer::alive() const {
  if (pid_ <= 0) return false;
  siginfo_t info{};
  info.si_pid = 0;
  // WNOWAIT: an ended server stays reapable for stop().
  return ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
         info.si_pid == 0;
}

std::string LocalServer::log() const {
  return read_file(log_);
}

int LocalServer::served_runs() const {
  int count = 0;
  const std::string text = log();
  for (std::size_t at = text.find("pulsebox serve: run in"); at != std::string::npos;
       at = text.find("pulsebox serve: run in", at + 1)) {
    ++count;
  }
  return count;
}

}  // namespace pulsebox::testing
