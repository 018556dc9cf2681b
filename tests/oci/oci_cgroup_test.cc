// ContainerCgroup on this host's real hierarchies (v2, or hybrid v1 + the
// unified one): leaves under a subtree of the test's own, the limits in the
// kernel's files, a process attached, killed through the cgroup, and the
// leaves removed. Root only: an absolute cgroupsPath sits under each
// hierarchy's root.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "helpers/oci_state.h"
#include "helpers/test_support.h"
#include "linux/cgroup.h"
#include "oci/cgroups.h"
#include "oci/process_ref.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

class OciCgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PULSEBOX_SKIP_UNLESS_ROOT("cgroupsPath under each hierarchy's root");
    host_ = linux_api::discover_cgroups();
    if (!host_.hierarchy_mounts.count("")) GTEST_SKIP() << "no cgroup2 hierarchy mounted";
    std::random_device random;
    subtree_ = "pulsebox-test-oci-" + std::to_string(random());
  }
  void TearDown() override {
    // Only what this test made: its leaves are gone; the subtree's parent
    // level is removed here.
    for (const auto& [key, mount] : host_.hierarchy_mounts) {
      const fs::path dir = fs::path(mount) / subtree_;
      ::rmdir((dir / "c1").c_str());
      ::rmdir(dir.c_str());
    }
  }
  std::string read(const std::string& dir, const char* file) {
    auto text = testing::read_file(fs::path(dir) / file);
    while (!text.empty() && text.back() == '\n')
      text.pop_back();
    return text;
  }

  linux_api::CgroupHost host_;
  std::string subtree_;
};

TEST_F(OciCgroupTest, LeafLimitsKillAndRemove) {
  auto path = oci::parse_cgroups_path("/" + subtree_ + "/c1", false, "c1");
  ASSERT_TRUE(path.ok());
  oci::CgroupResources resources;
  resources.memory_limit = 32 << 20;
  const bool swap =
      host_.hybrid ? fs::exists(host_.hierarchy_mounts["memory"] + "/memory.memsw.limit_in_bytes")
                   : fs::exists("/sys/fs/cgroup/memory.swap.max") || host_.swap_accounting;
  if (swap) resources.memory_swap = 64 << 20;
  resources.pids_limit = 16;
  resources.cpu_shares = 512;
  auto cgroup = oci::ContainerCgroup::create(host_, *path, resources);
  ASSERT_TRUE(cgroup.ok()) << cgroup.error().to_string();
  EXPECT_GE(cgroup->unified_fd(), 0);
  const std::string unified_leaf = host_.hierarchy_mounts[""] + "/" + subtree_ + "/c1";
  EXPECT_EQ(cgroup->leaf_dirs().front(), unified_leaf);
  if (host_.hybrid) {
    const std::string memory = host_.hierarchy_mounts["memory"] + "/" + subtree_ + "/c1";
    EXPECT_EQ(read(memory, "memory.limit_in_bytes"), "33554432");
    if (swap) {
      EXPECT_EQ(read(memory, "memory.memsw.limit_in_bytes"), "67108864");
    }
    EXPECT_EQ(read(host_.hierarchy_mounts["pids"] + "/" + subtree_ + "/c1", "pids.max"), "16");
    EXPECT_EQ(read(host_.hierarchy_mounts["cpu"] + "/" + subtree_ + "/c1", "cpu.shares"), "512");
  } else {
    EXPECT_EQ(read(unified_leaf, "memory.max"), "33554432");
    EXPECT_EQ(read(unified_leaf, "pids.max"), "16");
  }

  testing::SleepChild child;
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE(cgroup->attach(child.pid(), false).ok());
  auto pids = cgroup->pids();
  ASSERT_TRUE(pids.ok());
  EXPECT_EQ(*pids, std::vector<pid_t>{child.pid()});

  // A populated leaf is never adopted by another container.
  const auto second = oci::ContainerCgroup::create(host_, *path, {});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message().find("already holds processes"), std::string::npos);

  // As delete does it: from the record's leaves.
  auto recorded = oci::ContainerCgroup::from_record(cgroup->leaf_dirs());
  ASSERT_TRUE(recorded.kill_all(SIGKILL).ok());
  EXPECT_EQ(child.wait_for_signal(), SIGKILL);
  ASSERT_TRUE(recorded.remove().ok()) << "leaves still busy";
  for (const auto& leaf : cgroup->leaf_dirs())
    EXPECT_FALSE(fs::exists(leaf)) << leaf;
  // The parent level belongs to whoever made it (here the test): kept.
  EXPECT_TRUE(fs::exists(host_.hierarchy_mounts[""] + "/" + subtree_));
  EXPECT_TRUE(recorded.remove().ok());  // idempotent
}

TEST_F(OciCgroupTest, KillAllWithAnotherSignalGoesThroughPidfds) {
  auto path = oci::parse_cgroups_path("/" + subtree_ + "/c1", false, "c1");
  ASSERT_TRUE(path.ok());
  auto cgroup = oci::ContainerCgroup::create(host_, *path, {});
  ASSERT_TRUE(cgroup.ok()) << cgroup.error().to_string();
  testing::SleepChild first, second;
  ASSERT_TRUE(cgroup->attach(first.pid(), false).ok());
  ASSERT_TRUE(cgroup->attach(second.pid(), false).ok());
  ASSERT_TRUE(cgroup->kill_all(SIGTERM).ok());
  EXPECT_EQ(first.wait_for_signal(), SIGTERM);
  EXPECT_EQ(second.wait_for_signal(), SIGTERM);
  EXPECT_TRUE(cgroup->remove().ok());
}

// Through the CLI, from a record naming real leaves: `kill --all` reaches
// every process of the cgroup, and `delete` removes the leaves (and only
// them).
TEST_F(OciCgroupTest, CliKillAllAndDeleteTakeTheLeaves) {
  auto path = oci::parse_cgroups_path("/" + subtree_ + "/c1", false, "c1");
  ASSERT_TRUE(path.ok());
  auto cgroup = oci::ContainerCgroup::create(host_, *path, {});
  ASSERT_TRUE(cgroup.ok()) << cgroup.error().to_string();
  testing::SleepChild init, other;
  ASSERT_TRUE(cgroup->attach(init.pid(), false).ok());
  ASSERT_TRUE(cgroup->attach(other.pid(), false).ok());
  const auto start = oci::process_start_time(init.pid());
  ASSERT_TRUE(start.has_value());
  testing::TempDir temp;
  const fs::path root = temp / "root";
  testing::write_oci_record(root, "c1", init.pid(), *start, false, cgroup->leaf_dirs());

  // containerd's `ctr task ps` reads a JSON array of pids.
  const auto ps = testing::run_oci(root, {"ps", "--format", "json", "c1"});
  ASSERT_EQ(ps.exit_code, 0) << ps.err;
  auto listed = nlohmann::json::parse(ps.out).get<std::vector<pid_t>>();
  std::sort(listed.begin(), listed.end());
  auto expected = std::vector<pid_t>{init.pid(), other.pid()};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(listed, expected);

  const auto kill = testing::run_oci(root, {"kill", "--all", "c1", "TERM"});
  EXPECT_EQ(kill.exit_code, 0) << kill.err;
  EXPECT_EQ(init.wait_for_signal(), SIGTERM);
  EXPECT_EQ(other.wait_for_signal(), SIGTERM);

  const auto remove = testing::run_oci(root, {"delete", "c1"});
  EXPECT_EQ(remove.exit_code, 0) << remove.err;
  EXPECT_FALSE(fs::exists(root / "c1"));
  for (const auto& leaf : cgroup->leaf_dirs())
    EXPECT_FALSE(fs::exists(leaf)) << leaf;
  EXPECT_TRUE(fs::exists(host_.hierarchy_mounts[""] + "/" + subtree_));
}

}  // namespace
}  // namespace pulsebox
