// The fixture the OCI runtime's CLI tests share: one container "c1" driven
// through `pulsebox oci --root <temp>/state` with its output in files. As
// root the container gets a cgroup under a subtree of the test's own
// (removed after); as an ordinary user a user namespace and no cgroup.
//
//   class OciThingTest : public testing::OciContainerTest {};
//   TEST_F(OciThingTest, X) {
//     const auto b = bundle({"sh", "-c", "echo hi"});
//     ASSERT_EQ(oci({"run", "--bundle", b.dir.string(), kId}).exit_code, 0);
//   }
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/unique_fd.h"
#include "helpers/oci_bundle.h"
#include "helpers/test_support.h"
#include "linux/cgroup.h"

namespace pulsebox::testing {

class OciContainerTest : public ::testing::Test {
 protected:
  static constexpr const char* kId = "c1";

  // Skips where a container cannot be launched; as root, picks the subtree.
  // A subclass's SetUp calls this first and returns when IsSkipped().
  void SetUp() override;
  // Whatever a failed test left (delete --force), then the container's
  // leaf and the subtree.
  void TearDown() override;

  // <temp>/bundle running `args` as kId, under the subtree.
  OciBundle bundle(const std::vector<std::string>& args);
  // `pulsebox oci --root <root_> args...`, output appended to out_ and
  // err_ (emptied first with fresh_output_).
  OciFileRun oci(const std::vector<std::string>& args);

  // `state`'s status, or "(its error)".
  std::string status_of(const std::string& id);
  // Polls `state` until it says `status` (bounded).
  bool wait_for_status(const std::string& id, const std::string& status);
  // Polls out_ until it holds `text` (bounded).
  bool wait_for_output(const std::string& text);
  // The container's cgroup leaves left behind (none as an ordinary user).
  std::vector<std::string> leftover_leaves();
  // create and start kId from <temp>/bundle (a fatal gtest failure if
  // either fails).
  void create_and_start();

  TempDir temp_;
  std::filesystem::path root_ = temp_ / "state";
  std::filesystem::path out_ = temp_ / "out";
  std::filesystem::path err_ = temp_ / "err";
  linux_api::CgroupHost host_;
  std::string subtree_;  // "" as an ordinary user
  // For tests that compare a command's whole output.
  bool fresh_output_ = false;
};

// kId running `sleep 60`, created and started in SetUp; every oci() starts
// with empty out_ and err_ (exec's tests compare whole outputs).
class OciRunningContainerTest : public OciContainerTest {
 protected:
  void SetUp() override;
};

// `run` of a root container (no user namespace) given CAP_MKNOD, running
// `sh -c script` under a cgroup subtree of its own (removed after): for the
// device rules' tests. Root only.
OciFileRun run_with_cap_mknod(const std::string& script);

// A unix socket listening at `path`, as an engine's console socket;
// invalid after a gtest failure.
core::UniqueFd listen_console_socket(const std::filesystem::path& path);

// The terminal master a container sends on `listener` (accepted), and its
// name; invalid after a gtest failure.
core::UniqueFd accept_console_master(int listener, std::string& name);

// What `master` (a terminal's) gives until it holds `text` or a bound of
// reads passes.
std::string read_terminal_until(int master, const std::string& text);

}  // namespace pulsebox::testing
