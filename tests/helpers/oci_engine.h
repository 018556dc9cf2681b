// Engines driving pulsebox-runc in tests, without touching the host's
// engine state: a containerd of the test's own (root, state and sockets in a
// temporary directory, no CRI plugin, its own mount namespace), an OCI image
// layout made from a directory, and a snapshot of the host's network to
// prove nothing changed it.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace pulsebox::testing {

struct ToolRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// `argv` (argv[0] searched in PATH) with `env` added to this environment,
// stdin /dev/null, output collected; killed after `timeout_s`.
ToolRun run_tool(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                 int timeout_s = 120);

// Writes an OCI image layout tar of `rootfs` (oci-layout, index.json, one
// manifest, its config and one uncompressed layer, each under
// blobs/sha256/<digest>) to `tar`, scratch files under `work`. Returns the
// manifest digest ("sha256:..."); empty on failure, with `error` set.
std::string write_oci_image_tar(const std::filesystem::path& rootfs,
                                const std::filesystem::path& work, const std::filesystem::path& tar,
                                std::string& error);

// What an engine could change on the host's network: ip_forward, the link
// names and the iptables rules (when iptables is installed).
struct HostNetwork {
  std::string ip_forward;
  std::string links;
  std::string iptables;
  static HostNetwork snapshot();
  bool operator==(const HostNetwork&) const = default;
};

// A containerd of the test's own. The daemon runs in a private mount
// namespace (`unshare -m --propagation private`), so the snapshotter's and
// the shim's mounts stay out of the host's. Only the shim's paths under
// /run/containerd cannot be moved; stop() removes what this daemon added
// there (its namespace's runtime root, the fifo and socket entries, and the
// directories that did not exist before).
class PrivateContainerd {
 public:
  PrivateContainerd() = default;
  PrivateContainerd(const PrivateContainerd&) = delete;
  PrivateContainerd& operator=(const PrivateContainerd&) = delete;
  ~PrivateContainerd() { stop(); }

  // Starts it with everything under `dir`, for containers in namespace `ns`.
  // Empty when it answers, else why not.
  std::string start(const std::filesystem::path& dir, const std::string& ns);
  // `ctr -n NS --address SOCK args...`.
  ToolRun ctr(const std::vector<std::string>& args, int timeout_s = 60) const;
  // Removes the namespace's tasks, containers and images, stops the daemon
  // by pid (SIGTERM, then SIGKILL after a bound) and the shim's leftovers.
  // Returns what could not be removed (empty when all went).
  std::string stop();

  const std::string& ns() const { return ns_; }
  // pulsebox-runc's --root as the shim passes it.
  std::filesystem::path runtime_root() const;
  pid_t pid() const { return pid_; }

 private:
  std::filesystem::path dir_;
  std::string ns_;
  pid_t pid_ = -1;
  std::vector<std::filesystem::path> made_dirs_;  // /run/containerd dirs that were absent
  std::vector<std::string> fifo_before_, sockets_before_;
};

}  // namespace pulsebox::testing
