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
