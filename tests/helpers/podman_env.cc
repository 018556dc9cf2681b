#include "helpers/podman_env.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "helpers/oci_launch_support.h"

extern char** environ;

namespace pulsebox::testing {

namespace fs = std::filesystem;

ToolRun run_tool(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                 int timeout_s) {
  ToolRun result;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return result;
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry)
    environment.emplace_back(*entry);
  environment.insert(environment.end(), env.begin(), env.end());
  std::vector<char*> args, envp;
  auto argv_copy = argv;
  for (auto& arg : argv_copy)
    args.push_back(arg.data());
  args.push_back(nullptr);
  for (auto& entry : environment)
    envp.push_back(entry.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    result.output = "posix_spawn failed";
    return result;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    pollfd readable{pipe_fds[0], POLLIN, 0};
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      result.output += "\n(killed after " + std::to_string(timeout_s) + " s)";
      break;
    }
    if (::poll(&readable, 1, 200) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    result.output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string PodmanEnv::unavailable() {
  if (::geteuid() != 0)
    return "skipped (needs root): podman with cgroupfs leaves under /libpod_parent";
  if (const auto why = oci_launch_unavailable(); !why.empty()) return why;
  for (const char* tool : {"/usr/bin/podman", "/usr/bin/conmon", "/usr/bin/unshare"}) {
    if (::access(tool, X_OK) != 0) return std::string(tool) + " is not installed";
  }
  if (std::getenv("PULSEBOX_RUNC") == nullptr) return "PULSEBOX_RUNC is not set (meson sets it)";
  return "";
}

void PodmanEnv::set_up() {
  runtime_ = fs::absolute(std::getenv("PULSEBOX_RUNC"));
  {
    std::ofstream conf(dir_ / "containers.conf");
    // root lacks CAP_SYS_RESOURCE here: podman's default ulimits would fail.
    conf << "[containers]\ndefault_ulimits = [\"nofile=20000:20000\", "
            "\"nproc=32768:32768\"]\n"
            "[engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n";
  }
  make_busybox_root(dir_ / "rootfs");
  const auto tar = run_tool(
      {"tar", "-C", (dir_ / "rootfs").string(), "-cf", (dir_ / "rootfs.tar").string(), "."}, {});
  ASSERT_EQ(tar.exit_code, 0) << tar.output;
  const auto imported = run({"import", (dir_ / "rootfs.tar").string(), kImage});
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
}

PodmanEnv::~PodmanEnv() {
  if (runtime_.empty()) return;
  (void)run({"rm", "--all", "--force"});
  (void)run({"image", "rm", "--all", "--force"});
}

std::vector<std::string> PodmanEnv::command(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {"/usr/bin/unshare",
                                   "-m",
                                   "--propagation",
                                   "private",
                                   "/usr/bin/podman",
                                   "--root",
                                   (dir_ / "storage").string(),
                                   "--runroot",
                                   (dir_ / "run").string(),
                                   "--tmpdir",
                                   (dir_ / "tmp").string(),
                                   "--storage-driver",
                                   "overlay",
                                   "--runtime",
                                   runtime_.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::vector<std::string> PodmanEnv::environment() const {
  return {"CONTAINERS_CONF=" + (dir_ / "containers.conf").string()};
}

ToolRun PodmanEnv::run(const std::vector<std::string>& args) const {
  return run_tool(command(args), environment());
}

}  // namespace pulsebox::testing
