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

#include "helpers/oci_bundle.h"
#include "helpers/oci_launch_support.h"
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
    if (!root_.empty()) (void)testing::run_oci(root_, {"delete", "--force", "c1"});
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

  std::string leaf(const std::string& hierarchy) {
    return host_.hierarchy_mounts[hierarchy] + "/" + subtree_ + "/c1";
  }
  bool has(const std::string& hierarchy, const char* file) {
    return host_.hierarchy_mounts.count(hierarchy) &&
           fs::exists(fs::path(host_.hierarchy_mounts[hierarchy]) / file);
  }
  // No leaf of the test's container in any hierarchy.
  std::vector<std::string> leftover_leaves() {
    std::vector<std::string> left;
    for (const auto& [key, mount] : host_.hierarchy_mounts) {
      if (fs::exists(fs::path(mount) / subtree_ / "c1")) left.push_back(mount);
    }
    return left;
  }

  linux_api::CgroupHost host_;
  std::string subtree_;
  testing::TempDir temp_;
  fs::path root_;  // the CLI's --root, when a test drives it
};

// "major:minor" of a block device of this machine, a disk before a loop,
// ram or zram device ("" when it has none).
std::string some_block_device() {
  std::error_code error;
  std::string fallback;
  for (const auto& entry : fs::directory_iterator("/sys/block", error)) {
    auto text = testing::read_file(entry.path() / "dev");
    while (!text.empty() && text.back() == '\n')
      text.pop_back();
    if (text.empty()) continue;
    const std::string name = entry.path().filename().string();
    if (name.rfind("loop", 0) != 0 && name.rfind("ram", 0) != 0 && name.rfind("zram", 0) != 0)
      return text;
    if (fallback.empty()) fallback = text;
  }
  return fallback;
}

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

// The resources beyond memory, pids and cpu shares/quota, each read back
// from the container's own leaf: on a hybrid host the v1 files (cpuset with
// its parents given cpus and mems, blkio throttles, swappiness, the OOM
// killer), on cgroup v2 the unified ones (tools/vm-test).
TEST_F(OciCgroupTest, MoreResourcesReadBackFromTheLeaves) {
  auto path = oci::parse_cgroups_path("/" + subtree_ + "/c1", false, "c1");
  ASSERT_TRUE(path.ok());
  const std::string device = some_block_device();
  oci::CgroupResources r;
  r.cpuset_cpus = "0";
  r.cpuset_mems = "0";
  r.cpu_quota = 50000;
  r.cpu_period = 100000;
  const bool idle = host_.hybrid ? has("cpu", "cpu.idle") : true;
  if (idle) r.cpu_idle = 1;
  if (!device.empty()) {
    r.block_io = oci::BlockIoLimits{};
    const auto colon = device.find(':');
    const std::int64_t major = std::stoll(device.substr(0, colon));
    const std::int64_t minor = std::stoll(device.substr(colon + 1));
    r.block_io->read_bps = {{major, minor, 1048576}};
    r.block_io->write_iops = {{major, minor, 100}};
  }
  if (host_.hybrid) {
    r.memory_swappiness = 10;
    r.disable_oom_killer = true;
  } else {
    r.unified = {{"memory.high", "33554432"}};
  }
  auto cgroup = oci::ContainerCgroup::create(host_, *path, r);
  ASSERT_TRUE(cgroup.ok()) << cgroup.error().to_string();
  if (host_.hybrid) {
    EXPECT_EQ(read(leaf("cpuset"), "cpuset.cpus"), "0");
    EXPECT_EQ(read(leaf("cpuset"), "cpuset.mems"), "0");
    // The level create made above the leaf got its parent's sets.
    EXPECT_EQ(read(host_.hierarchy_mounts["cpuset"] + "/" + subtree_, "cpuset.cpus"),
              read(host_.hierarchy_mounts["cpuset"], "cpuset.cpus"));
    if (idle) {
      EXPECT_EQ(read(leaf("cpu"), "cpu.idle"), "1");
    }
    EXPECT_EQ(read(leaf("memory"), "memory.swappiness"), "10");
    EXPECT_NE(read(leaf("memory"), "memory.oom_control").find("oom_kill_disable 1"),
              std::string::npos);
    if (!device.empty()) {
      EXPECT_EQ(read(leaf("blkio"), "blkio.throttle.read_bps_device"), device + " 1048576");
      EXPECT_EQ(read(leaf("blkio"), "blkio.throttle.write_iops_device"), device + " 100");
    }
  } else {
    const std::string unified = leaf("");
    EXPECT_EQ(read(unified, "cpuset.cpus"), "0");
    EXPECT_EQ(read(unified, "cpuset.mems"), "0");
    EXPECT_EQ(read(unified, "cpu.idle"), "1");
    EXPECT_EQ(read(unified, "memory.high"), "33554432");
    if (!device.empty()) {
      EXPECT_NE(read(unified, "io.max").find(device + " rbps=1048576 wbps=max riops=max wiops=100"),
                std::string::npos)
          << read(unified, "io.max");
    }
  }
  // A process can live in the leaves (a cpuset without cpus could hold none).
  testing::SleepChild child;
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE(cgroup->attach(child.pid(), false).ok());
  ASSERT_TRUE(cgroup->kill_all(SIGKILL).ok());
  EXPECT_EQ(child.wait_for_signal(), SIGKILL);
  ASSERT_TRUE(cgroup->remove().ok());
  EXPECT_EQ(leftover_leaves(), std::vector<std::string>{});
}

// A limit this host cannot apply is refused naming the config path and what
// is missing, and nothing is left behind: never skipped. On this hybrid host
// blkio.weight is absent (no cfq) but the bfq scheduler's blkio.bfq.weight
// takes the weight, and blkio.leaf_weight is absent.
TEST_F(OciCgroupTest, WhatTheHostLacksIsRefusedByPath) {
  auto path = oci::parse_cgroups_path("/" + subtree_ + "/c1", false, "c1");
  ASSERT_TRUE(path.ok());
  oci::CgroupResources weight;
  weight.block_io = oci::BlockIoLimits{};
  weight.block_io->weight = 300;
  bool leaf_weight_file = true;
  {
    auto cgroup = oci::ContainerCgroup::create(host_, *path, weight);
    if (cgroup.ok()) {
      const std::string dir = host_.hybrid ? leaf("blkio") : leaf("");
      std::string written;
      for (const char* file : {"blkio.weight", "blkio.bfq.weight", "io.bfq.weight", "io.weight"}) {
        if (fs::exists(fs::path(dir) / file)) written += read(dir, file) + ";";
      }
      EXPECT_NE(written.find(host_.hybrid ? "300" : "default"), std::string::npos) << written;
      leaf_weight_file = fs::exists(fs::path(dir) / "blkio.leaf_weight");
      ASSERT_TRUE(cgroup->remove().ok());
    } else {
      EXPECT_NE(cgroup.error().message().find("linux.resources.blockIO.weight"), std::string::npos)
          << cgroup.error().message();
      EXPECT_NE(cgroup.error().message().find("neither"), std::string::npos);
      EXPECT_EQ(leftover_leaves(), std::vector<std::string>{});
    }
  }
  if (host_.hybrid && !leaf_weight_file) {
    oci::CgroupResources leaf_weight;
    leaf_weight.block_io = oci::BlockIoLimits{};
    leaf_weight.block_io->leaf_weight = 100;
    const auto refused = oci::ContainerCgroup::create(host_, *path, leaf_weight);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message().find("linux.resources.blockIO.leafWeight"),
              std::string::npos)
        << refused.error().message();
    EXPECT_NE(refused.error().message().find("blkio.leaf_weight"), std::string::npos);
    EXPECT_EQ(leftover_leaves(), std::vector<std::string>{});
  }
  if (host_.hybrid && !host_.hierarchy_mounts.count("hugetlb")) {
    oci::CgroupResources pages;
    pages.hugepage_limits = {{"2MB", 2097152}};
    const auto refused = oci::ContainerCgroup::create(host_, *path, pages);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message().find("linux.resources.hugepageLimits[0]"),
              std::string::npos);
    EXPECT_NE(refused.error().message().find("no hugetlb hierarchy"), std::string::npos);
    EXPECT_EQ(leftover_leaves(), std::vector<std::string>{});
  }
  if (host_.hybrid) {
    oci::CgroupResources unified;
    unified.unified = {{"memory.high", "1"}};
    const auto refused = oci::ContainerCgroup::create(host_, *path, unified);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message().find("linux.resources.unified.memory.high"),
              std::string::npos);
  }
}

// From config.json through `create`: the engine's fields reach the
// container's leaves (podman --cpuset-cpus 0 --device-read-bps ...).
TEST_F(OciCgroupTest, ConfigResourcesReachTheContainersLeaves) {
  if (const auto why = testing::oci_launch_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const fs::path& temp = temp_.path();
  root_ = temp / "state";
  auto bundle = testing::make_oci_bundle(temp / "bundle", {"sleep", "60"}, subtree_, "c1");
  const std::string device = some_block_device();
  auto& resources = bundle.config["linux"]["resources"];
  resources["cpu"] = {{"cpus", "0"}, {"mems", "0"}};
  if (!device.empty()) {
    const auto colon = device.find(':');
    resources["blockIO"] = {{"throttleReadBpsDevice",
                             {{{"major", std::stoll(device.substr(0, colon))},
                               {"minor", std::stoll(device.substr(colon + 1))},
                               {"rate", 2097152}}}}};
  }
  if (host_.hybrid) resources["memory"] = {{"swappiness", 20}};
  bundle.write();
  const auto created = testing::run_oci_to_files(
      root_, {"create", "--bundle", bundle.dir.string(), "c1"}, temp / "out", temp / "err");
  ASSERT_EQ(created.exit_code, 0) << created.err;
  // The created process is in every leaf made for it (on a hybrid host it
  // moves itself into the v1 ones after Go).
  const auto state = testing::run_oci(root_, {"state", "c1"});
  ASSERT_EQ(state.exit_code, 0) << state.err;
  const std::string pid = std::to_string(nlohmann::json::parse(state.out)["pid"].get<int>());
  int leaves = 0;
  for (const auto& [key, mount] : host_.hierarchy_mounts) {
    if (!fs::exists(leaf(key))) continue;
    ++leaves;
    EXPECT_EQ(read(leaf(key), "cgroup.procs"), pid) << leaf(key);
  }
  EXPECT_GE(leaves, host_.hybrid ? 5 : 1);
  const std::string cpuset = host_.hybrid ? leaf("cpuset") : leaf("");
  EXPECT_EQ(read(cpuset, "cpuset.cpus"), "0");
  if (host_.hybrid) {
    EXPECT_EQ(read(leaf("memory"), "memory.swappiness"), "20");
    if (!device.empty()) {
      EXPECT_EQ(read(leaf("blkio"), "blkio.throttle.read_bps_device"), device + " 2097152");
    }
  } else if (!device.empty()) {
    EXPECT_NE(read(leaf(""), "io.max").find(device + " rbps=2097152"), std::string::npos);
  }
  const auto deleted = testing::run_oci(root_, {"delete", "--force", "c1"});
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
  EXPECT_EQ(leftover_leaves(), std::vector<std::string>{});

  // A missing file is refused at create naming the config path (no
  // blkio.leaf_weight without the cfq scheduler).
  if (host_.hybrid && !has("blkio", "blkio.leaf_weight")) {
    resources.erase("blockIO");
    resources["blockIO"] = {{"leafWeight", 300}};
    bundle.write();
    const auto refused = testing::run_oci_to_files(
        root_, {"create", "--bundle", bundle.dir.string(), "c1"}, temp / "out2", temp / "err2");
    EXPECT_NE(refused.exit_code, 0);
    EXPECT_NE(refused.err.find("linux.resources.blockIO.leafWeight"), std::string::npos)
        << refused.err;
    EXPECT_NE(refused.err.find("blkio.leaf_weight: No such file"), std::string::npos)
        << refused.err;
    EXPECT_EQ(leftover_leaves(), std::vector<std::string>{});
  }
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
