// podman driving pulsebox-runc in a sandbox of the test's own (design §6):
// storage, run root, tmpdir and containers.conf in a TempDir, the busybox
// image imported there, and every podman command in a mount namespace of
// its own (`unshare -m --propagation private`), so podman's mounts never
// reach the host's. Callers must always pass `--network none`: podman's
// default network changes the host (a bridge, iptables chains,
// ip_forward).
//
//   if (auto why = PodmanEnv::unavailable(); !why.empty()) GTEST_SKIP() << why;
//   PodmanEnv podman(temp_dir);
//   ASSERT_NO_FATAL_FAILURE(podman.set_up());       // conf + image import
//   auto run = podman.run({"run", "--rm", "--network", "none", PodmanEnv::kImage, "true"});
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "helpers/oci_engine.h"  // ToolRun, run_tool

namespace pulsebox::testing {

class PodmanEnv {
 public:
  static constexpr const char* kImage = "localhost/pulsebox-test-bb:latest";

  // Empty when podman can run containers on pulsebox-runc here (root,
  // podman, conmon and unshare installed, PULSEBOX_RUNC set), else why not.
  static std::string unavailable();

  explicit PodmanEnv(std::filesystem::path dir) : dir_(std::move(dir)) {}
  ~PodmanEnv();
  PodmanEnv(const PodmanEnv&) = delete;
  PodmanEnv& operator=(const PodmanEnv&) = delete;

  // containers.conf (cgroupfs, file events, ulimits root may set here) and
  // the busybox image; gtest failures when either fails.
  void set_up();
  // The whole command line of `podman ARGS...` and the environment it
  // needs, for a caller that runs it itself (a pty, a background run).
  std::vector<std::string> command(const std::vector<std::string>& args) const;
  std::vector<std::string> environment() const;
  ToolRun run(const std::vector<std::string>& args) const;

 private:
  std::filesystem::path dir_;
  std::filesystem::path runtime_;
};

}  // namespace pulsebox::testing
