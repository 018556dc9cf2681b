#include "helpers/oci_bundle.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string_view>
#include <thread>

#include "helpers/oci_launch_support.h"
#include "helpers/test_support.h"

extern char** environ;

namespace pulsebox::testing {

namespace fs = std::filesystem;
using json = nlohmann::json;

void OciBundle::write() const {
  std::ofstream out(dir / "config.json", std::ios::trunc);
  out << config.dump(2);
}

OciBundle make_oci_bundle(const fs::path& dir, const std::vector<std::string>& args,
                          const std::string& cgroup_subtree, const std::string& id) {
  make_busybox_root(dir / "rootfs");
  const json caps = {"CAP_AUDIT_WRITE", "CAP_KILL", "CAP_NET_BIND_SERVICE"};
  json namespaces = {{{"type", "pid"}},
                     {{"type", "network"}},
                     {{"type", "ipc"}},
                     {{"type", "uts"}},
                     {{"type", "mount"}}};
  json linux = {
      {"namespaces", namespaces},
      {"maskedPaths", {"/proc/kcore", "/proc/keys", "/sys/firmware"}},
      {"readonlyPaths", {"/proc/sys", "/proc/sysrq-trigger"}},
  };
  if (::geteuid() != 0) {
    linux["namespaces"].push_back({{"type", "user"}});
    linux["uidMappings"] = {{{"containerID", 0}, {"hostID", ::getuid()}, {"size", 1}}};
    linux["gidMappings"] = {{{"containerID", 0}, {"hostID", ::getgid()}, {"size", 1}}};
  } else if (!cgroup_subtree.empty()) {
    linux["cgroupsPath"] = "/" + cgroup_subtree + "/" + id;
    linux["resources"] = {{"devices", {{{"allow", false}, {"access", "rwm"}}}},
                          {"pids", {{"limit", 64}}}};
  }
  OciBundle bundle;
  bundle.dir = dir;
  bundle.config = {
      {"ociVersion", "1.0.2-dev"},
      {"process",
       {{"terminal", false},
        {"user", {{"uid", 0}, {"gid", 0}}},
        {"args", args},
        {"env", {"PATH=/usr/bin:/bin", "TERM=xterm"}},
        {"cwd", "/"},
        {"capabilities", {{"bounding", caps}, {"effective", caps}, {"permitted", caps}}},
        {"rlimits", {{{"type", "RLIMIT_NOFILE"}, {"hard", 1024}, {"soft", 1024}}}},
        {"noNewPrivileges", true}}},
      {"root", {{"path", "rootfs"}, {"readonly", true}}},
      {"hostname", "pulsebox-test"},
      {"mounts",
       {{{"destination", "/proc"}, {"type", "proc"}, {"source", "proc"}},
        {{"destination", "/dev"},
         {"type", "tmpfs"},
         {"source", "tmpfs"},
         {"options", {"nosuid", "strictatime", "mode=755", "size=65536k"}}},
        {{"destination", "/dev/pts"},
         {"type", "devpts"},
         {"source", "devpts"},
         {"options", {"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"}}},
        {{"destination", "/dev/shm"},
         {"type", "tmpfs"},
         {"source", "shm"},
         {"options", {"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}}},
        {{"destination", "/dev/mqueue"},
         {"type", "mqueue"},
         {"source", "mqueue"},
         {"options", {"nosuid", "noexec", "nodev"}}},
        {{"destination", "/sys"},
         {"type", "sysfs"},
         {"source", "sysfs"},
         {"options", {"nosuid", "noexec", "nodev", "ro"}}}}},
      {"linux", linux},
  };
  bundle.write();
  return bundle;
}

pid_t spawn_oci(const fs::path& root, const std::vector<std::string>& args,
                const fs::path& out_file, const fs::path& err_file,
                const std::vector<std::string>& env) {
  const char* binary = std::getenv("PULSEBOX_BIN");
  if (binary == nullptr) {
    ADD_FAILURE() << "PULSEBOX_BIN is not set (meson sets it)";
    return -1;
  }
  std::vector<std::string> full = {binary, "oci", "--root", root.string()};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& arg : full)
    argv.push_back(arg.data());
  argv.push_back(nullptr);
  // `env` first; this environment's entries of the same names dropped.
  std::vector<std::string> env_text = env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    bool replaced = false;
    for (const auto& added : env) {
      const auto name = std::string_view(added).substr(0, added.find('=') + 1);
      replaced = replaced || text.rfind(name, 0) == 0;
    }
    if (!replaced) env_text.emplace_back(text);
  }
  std::vector<char*> envp;
  for (auto& entry : env_text)
    envp.push_back(entry.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_file.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_file.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0600);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, binary, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << binary << ": " << rc;
    return -1;
  }
  return pid;
}

OciFileRun run_oci_to_files(const fs::path& root, const std::vector<std::string>& args,
                            const fs::path& out_file, const fs::path& err_file) {
  OciFileRun result;
  const pid_t pid = spawn_oci(root, args, out_file, err_file);
  if (pid < 0) return result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      ADD_FAILURE() << "pulsebox oci did not end within 60 s";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(out_file);
  result.err = read_file(err_file);
  return result;
}

}  // namespace pulsebox::testing
