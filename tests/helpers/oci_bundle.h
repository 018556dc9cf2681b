// An OCI bundle for the runtime's tests: a busybox root (the static host
// /bin/busybox and applet links) and a config.json like `runc spec` writes,
// which works as root (no user namespace, a cgroup under the test's own
// subtree) and as an ordinary user (a user namespace mapping uid and gid 0
// to the caller, no cgroup). And a way to run pulsebox-runc whose output
// goes to files, since a created container keeps create's stdout and stderr.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pulsebox::testing {

struct OciBundle {
  std::filesystem::path dir;  // holds config.json and rootfs/
  nlohmann::json config;
  // Writes `config` to dir/config.json (call after editing it).
  void write() const;
};

// `dir`/rootfs with busybox, and a config running `args`. `cgroup_subtree`
// (root only; "" for none) puts the container at /<subtree>/<id>.
OciBundle make_oci_bundle(const std::filesystem::path& dir, const std::vector<std::string>& args,
                          const std::string& cgroup_subtree, const std::string& id);

struct OciFileRun {
  int exit_code = -1;
  std::string out, err;  // the files' contents once the command ended
};

// `pulsebox oci --root ROOT args...` started in the background with stdin
// /dev/null and stdout and stderr appended to `out_file` and `err_file`;
// `env` (NAME=VALUE) replaces those names in this environment. Its pid
// (the caller reaps it), or -1 after a gtest failure.
pid_t spawn_oci(const std::filesystem::path& root, const std::vector<std::string>& args,
                const std::filesystem::path& out_file, const std::filesystem::path& err_file,
                const std::vector<std::string>& env = {});

// `pulsebox oci --root ROOT args...` with stdin /dev/null and stdout and
// stderr appended to `out_file` and `err_file`; waits for the command (not
// for what it leaves running), bounded by 60 s.
OciFileRun run_oci_to_files(const std::filesystem::path& root, const std::vector<std::string>& args,
                            const std::filesystem::path& out_file,
                            const std::filesystem::path& err_file);

}  // namespace pulsebox::testing
