// The container's cgroups (src/oci/cgroups.h): cgroupsPath parsing, the
// resource mapping of design §2.4 on v1 and v2, and ContainerCgroup's files
// and values through a temporary directory standing in for the hierarchies.
#include <fcntl.h>

#include "helpers/test_support.h"
#include "oci/cgroups.h"

namespace pulsebox::oci {
namespace {

namespace fs = std::filesystem;

TEST(OciCgroupsPath, Forms) {
  auto absolute = parse_cgroups_path("/libpod_parent/libpod-abc", false, "abc");
  ASSERT_TRUE(absolute.ok());
  EXPECT_EQ(absolute->relative, "libpod_parent/libpod-abc");
  EXPECT_FALSE(absolute->from_own_cgroup);
  auto relative = parse_cgroups_path("a//b/", false, "x");
  ASSERT_TRUE(relative.ok());
  EXPECT_EQ(relative->relative, "a/b");
  EXPECT_TRUE(relative->from_own_cgroup);
  auto empty = parse_cgroups_path("", false, "c1");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->relative, "pulsebox-oci/c1");
  EXPECT_FALSE(empty->from_own_cgroup);
}

TEST(OciCgroupsPath, Refusals) {
  const auto systemd = parse_cgroups_path("/a", true, "x");
  ASSERT_FALSE(systemd.ok());
  EXPECT_NE(systemd.error().message().find("--systemd-cgroup"), std::string::npos);
  EXPECT_NE(systemd.error().message().find("SystemdCgroup = false"), std::string::npos);
  const auto slice = parse_cgroups_path("system.slice:libpod:abc", false, "x");
  ASSERT_FALSE(slice.ok());
  EXPECT_NE(slice.error().message().find("cgroupfs manager"), std::string::npos);
  for (const char* bad : {"/a/../b", "..", "/./a", "/", "//", "/a/cgroup.procs"}) {
    const auto result = parse_cgroups_path(bad, false, "x");
    EXPECT_FALSE(result.ok()) << bad;
  }
}

std::map<std::string, std::string> as_map(const std::vector<CgroupWrite>& writes) {
  std::map<std::string, std::string> out;
  for (const auto& w : writes)
    out[(w.hierarchy.empty() ? "" : w.hierarchy + ":") + w.file] = w.value;
  return out;
}

TEST(OciCgroupWrites, V1) {
  CgroupResources r;
  r.memory_limit = 32 << 20;
  r.memory_swap = 64 << 20;  // podman's 2 x limit
  r.memory_reservation = 16 << 20;
  r.pids_limit = 16;
  r.cpu_shares = 1024;
  r.cpu_quota = 50000;
  r.cpu_period = 100000;
  auto writes = plan_cgroup_writes(r, false);
  ASSERT_TRUE(writes.ok()) << writes.error().to_string();
  const auto m = as_map(*writes);
  EXPECT_EQ(m.at("memory:memory.limit_in_bytes"), std::to_string(32 << 20));
  EXPECT_EQ(m.at("memory:memory.memsw.limit_in_bytes"), std::to_string(64 << 20));
  EXPECT_EQ(m.at("memory:memory.soft_limit_in_bytes"), std::to_string(16 << 20));
  EXPECT_EQ(m.at("pids:pids.max"), "16");
  EXPECT_EQ(m.at("cpu:cpu.shares"), "1024");
  EXPECT_EQ(m.at("cpu:cpu.cfs_quota_us"), "50000");
  EXPECT_EQ(m.at("cpu:cpu.cfs_period_us"), "100000");
  // memory before memsw, period before quota.
  std::vector<std::string> order;
  for (const auto& w : *writes)
    order.push_back(w.file);
  const auto at = [&](const char* f) { return std::find(order.begin(), order.end(), f); };
  EXPECT_LT(at("memory.limit_in_bytes"), at("memory.memsw.limit_in_bytes"));
  EXPECT_LT(at("cpu.cfs_period_us"), at("cpu.cfs_quota_us"));
}

TEST(OciCgroupWrites, V2) {
  CgroupResources r;
  r.memory_limit = 32 << 20;
  r.memory_swap = 64 << 20;
  r.pids_limit = -1;
  r.cpu_shares = 1024;
  r.cpu_quota = 50000;
  auto writes = plan_cgroup_writes(r, true);
  ASSERT_TRUE(writes.ok()) << writes.error().to_string();
  const auto m = as_map(*writes);
  EXPECT_EQ(m.at("memory.max"), std::to_string(32 << 20));
  EXPECT_EQ(m.at("memory.swap.max"), std::to_string(32 << 20));  // swap - limit
  EXPECT_EQ(m.at("pids.max"), "max");
  EXPECT_EQ(m.at("cpu.weight"), "39");  // 1 + (1024-2)*9999/262142
  EXPECT_EQ(m.at("cpu.max"), "50000 100000");
}

TEST(OciCgroupWrites, UnsetAndUnlimited) {
  CgroupResources r;
  r.memory_limit = 0;  // unset
  r.pids_limit = 0;
  EXPECT_TRUE(plan_cgroup_writes(r, false)->empty());
  r.memory_limit = -1;
  r.memory_swap = -1;
  const auto v1 = as_map(plan_cgroup_writes(r, false).value());
  EXPECT_EQ(v1.at("memory:memory.limit_in_bytes"), "-1");
  EXPECT_EQ(v1.at("memory:memory.memsw.limit_in_bytes"), "-1");
  const auto v2 = as_map(plan_cgroup_writes(r, true).value());
  EXPECT_EQ(v2.at("memory.max"), "max");
  EXPECT_EQ(v2.at("memory.swap.max"), "max");
}

TEST(OciCgroupWrites, Refusals) {
  CgroupResources swap_only;
  swap_only.memory_swap = 64 << 20;
  const auto a = plan_cgroup_writes(swap_only, false);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message().find("linux.resources.memory.swap"), std::string::npos);
  CgroupResources below;
  below.memory_limit = 64 << 20;
  below.memory_swap = 32 << 20;
  EXPECT_FALSE(plan_cgroup_writes(below, true).ok());
  CgroupResources shares;
  shares.cpu_shares = 1;
  EXPECT_FALSE(plan_cgroup_writes(shares, true).ok());
}

// Every write of one kind, in order ("file=value" per line).
std::vector<std::string> lines(const std::vector<CgroupWrite>& writes, const std::string& file) {
  std::vector<std::string> out;
  for (const auto& w : writes)
    if (w.file == file) out.push_back(w.value);
  return out;
}

const CgroupWrite* find_write(const std::vector<CgroupWrite>& writes, const std::string& file) {
  for (const auto& w : writes)
    if (w.file == file) return &w;
  return nullptr;
}

CgroupResources more_resources() {
  CgroupResources r;
  r.cpu_burst = 1000;
  r.cpu_idle = 1;
  r.cpuset_cpus = "0-1";
  r.cpuset_mems = "0";
  BlockIoLimits b;
  b.weight = 500;
  b.weight_device = {{8, 0, 300}, {8, 16, 0}};  // the second unset
  b.read_bps = {{8, 0, 1048576}};
  b.write_bps = {{8, 0, 0}};
  b.read_iops = {{8, 0, 100}};
  b.write_iops = {{8, 16, 200}};
  r.block_io = b;
  r.hugepage_limits = {{"2MB", 4194304}};
  return r;
}

TEST(OciCgroupWrites, V1MoreResources) {
  CgroupResources r = more_resources();
  r.memory_swappiness = 10;
  r.disable_oom_killer = true;
  auto writes = plan_cgroup_writes(r, false);
  ASSERT_TRUE(writes.ok()) << writes.error().to_string();
  const auto m = as_map(*writes);
  EXPECT_EQ(m.at("memory:memory.swappiness"), "10");
  EXPECT_EQ(m.at("memory:memory.oom_control"), "1");
  EXPECT_EQ(m.at("cpu:cpu.cfs_burst_us"), "1000");
  EXPECT_EQ(m.at("cpu:cpu.idle"), "1");
  EXPECT_EQ(m.at("cpuset:cpuset.cpus"), "0-1");
  EXPECT_EQ(m.at("cpuset:cpuset.mems"), "0");
  EXPECT_EQ(m.at("blkio:blkio.weight"), "500");
  const auto* weight = find_write(*writes, "blkio.weight");
  EXPECT_EQ(weight->alternative_file, "blkio.bfq.weight");
  EXPECT_EQ(weight->alternative_value, "500");
  EXPECT_EQ(lines(*writes, "blkio.weight_device"), std::vector<std::string>{"8:0 300"});
  EXPECT_EQ(find_write(*writes, "blkio.weight_device")->resource,
            "linux.resources.blockIO.weightDevice[0].weight");
  EXPECT_EQ(m.at("blkio:blkio.throttle.read_bps_device"), "8:0 1048576");
  EXPECT_EQ(m.at("blkio:blkio.throttle.write_bps_device"), "8:0 0");
  EXPECT_EQ(m.at("blkio:blkio.throttle.read_iops_device"), "8:0 100");
  EXPECT_EQ(m.at("blkio:blkio.throttle.write_iops_device"), "8:16 200");
  EXPECT_EQ(find_write(*writes, "blkio.throttle.write_iops_device")->resource,
            "linux.resources.blockIO.throttleWriteIOPSDevice[0]");
  EXPECT_EQ(m.at("hugetlb:hugetlb.2MB.limit_in_bytes"), "4194304");
  BlockIoLimits leaf;
  leaf.leaf_weight = 100;
  leaf.leaf_weight_device = {{8, 0, 0}, {8, 16, 50}};
  CgroupResources with_leaf;
  with_leaf.block_io = leaf;
  const auto leaf_writes = plan_cgroup_writes(with_leaf, false).value();
  EXPECT_EQ(as_map(leaf_writes).at("blkio:blkio.leaf_weight"), "100");
  EXPECT_EQ(lines(leaf_writes, "blkio.leaf_weight_device"), std::vector<std::string>{"8:16 50"});
}

TEST(OciCgroupWrites, V2MoreResources) {
  CgroupResources r = more_resources();
  r.unified = {{"memory.high", "1000000"}, {"pids.max", "7"}};
  auto writes = plan_cgroup_writes(r, true);
  ASSERT_TRUE(writes.ok()) << writes.error().to_string();
  for (const auto& w : *writes)
    EXPECT_EQ(w.hierarchy, "") << w.file;
  const auto m = as_map(*writes);
  EXPECT_EQ(m.at("cpu.max.burst"), "1000");
  EXPECT_EQ(m.at("cpu.idle"), "1");
  EXPECT_EQ(m.at("cpuset.cpus"), "0-1");
  EXPECT_EQ(m.at("cpuset.mems"), "0");
  // io.bfq.weight takes blkio's range; io.weight's is 1-10000 (runc's
  // conversion: 1 + (500 - 10) * 9999 / 990).
  const auto* weight = find_write(*writes, "io.bfq.weight");
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->value, "500");
  EXPECT_EQ(weight->alternative_file, "io.weight");
  EXPECT_EQ(weight->alternative_value, "4950");
  EXPECT_EQ(lines(*writes, "io.bfq.weight"), (std::vector<std::string>{"500", "8:0 300"}));
  EXPECT_EQ(lines(*writes, "io.max"),
            (std::vector<std::string>{"8:0 rbps=1048576", "8:0 wbps=max", "8:0 riops=100",
                                      "8:16 wiops=200"}));
  EXPECT_EQ(m.at("hugetlb.2MB.max"), "4194304");
  EXPECT_EQ(m.at("memory.high"), "1000000");
  // unified comes last, so that it wins over the fields (runc's order).
  EXPECT_EQ(writes->back().file, "pids.max");
  EXPECT_EQ(writes->back().resource, "linux.resources.unified.pids.max");
}

// What one cgroup version cannot do is refused naming the config path, and
// values that would become part of a file name or a file's text are checked.
TEST(OciCgroupWrites, RefusalsByVersionAndValue) {
  const auto refused = [](const CgroupResources& r, bool v2, const std::string& path) {
    const auto writes = plan_cgroup_writes(r, v2);
    ASSERT_FALSE(writes.ok()) << path;
    EXPECT_NE(writes.error().message().find(path), std::string::npos) << writes.error().message();
  };
  CgroupResources swappiness;
  swappiness.memory_swappiness = 0;
  refused(swappiness, true, "linux.resources.memory.swappiness");
  EXPECT_TRUE(plan_cgroup_writes(swappiness, false).ok());
  CgroupResources oom;
  oom.disable_oom_killer = true;
  refused(oom, true, "linux.resources.memory.disableOOMKiller");
  CgroupResources leaf;
  leaf.block_io = BlockIoLimits{};
  leaf.block_io->leaf_weight = 100;
  refused(leaf, true, "linux.resources.blockIO.leafWeight");
  CgroupResources leaf_device;
  leaf_device.block_io = BlockIoLimits{};
  leaf_device.block_io->leaf_weight_device = {{8, 0, 0}, {8, 0, 100}};
  refused(leaf_device, true, "linux.resources.blockIO.weightDevice[1].leafWeight");
  CgroupResources unified;
  unified.unified = {{"memory.high", "1"}};
  refused(unified, false, "linux.resources.unified.memory.high");
  for (const char* key :
       {"cgroup.procs", "cgroup.subtree_control", "../memory.max", "a/b.c", "nodot", ".hidden"}) {
    CgroupResources bad;
    bad.unified = {{key, "1"}};
    refused(bad, true, std::string("linux.resources.unified.") + key);
  }
  CgroupResources weight;
  weight.block_io = BlockIoLimits{};
  weight.block_io->weight = 5;
  refused(weight, false, "linux.resources.blockIO.weight");
  CgroupResources cpus;
  cpus.cpuset_cpus = "0\n1";
  refused(cpus, false, "linux.resources.cpu.cpus");
  CgroupResources mems;
  mems.cpuset_mems = "all";
  refused(mems, true, "linux.resources.cpu.mems");
  CgroupResources idle;
  idle.cpu_idle = 2;
  refused(idle, true, "linux.resources.cpu.idle");
  for (const char* size : {"2M", "../2MB", "MB", "2XB", "2MBB"}) {
    CgroupResources pages;
    pages.hugepage_limits = {{size, 1}};
    refused(pages, false, "linux.resources.hugepageLimits[0].pageSize");
  }
}

// A hybrid host whose hierarchies are directories of a temp dir; the leaf's
// control files are made in advance, as the kernel would.
class OciCgroupDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* key : {"", "memory", "pids", "cpu", "cpuacct", "devices"}) {
      const fs::path mount = temp_ / (std::string(key).empty() ? "unified" : key);
      fs::create_directories(mount);
      host_.hierarchy_mounts[key] = mount.string();
      host_.own_cgroup_dirs[key] = (mount / "own").string();
    }
    host_.hybrid = true;
  }
  void make_leaf(const char* key, const std::vector<std::string>& files) {
    const fs::path leaf = fs::path(host_.hierarchy_mounts[key]) / "parent" / "c1";
    fs::create_directories(leaf);
    testing::write_file(leaf / "cgroup.procs", "");
    for (const auto& file : files)
      testing::write_file(leaf / file, "");
  }
  std::string value(const char* key, const char* file) {
    return testing::read_file(fs::path(host_.hierarchy_mounts[key]) / "parent" / "c1" / file);
  }

  testing::TempDir temp_;
  linux_api::CgroupHost host_;
};

TEST_F(OciCgroupDirTest, WritesLimitsIntoEachHierarchy) {
  make_leaf("", {});
  make_leaf("memory", {"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"});
  make_leaf("pids", {"pids.max"});
  make_leaf("cpu", {"cpu.shares"});
  make_leaf("cpuacct", {});
  make_leaf("devices", {});
  CgroupResources r;
  r.memory_limit = 33554432;
  r.memory_swap = 67108864;
  r.pids_limit = 16;
  r.cpu_shares = 1024;
  auto cgroup = ContainerCgroup::create(host_, {"parent/c1", false}, r);
  ASSERT_TRUE(cgroup.ok()) << cgroup.error().to_string();
  EXPECT_EQ(value("memory", "memory.limit_in_bytes"), "33554432");
  EXPECT_EQ(value("memory", "memory.memsw.limit_in_bytes"), "67108864");
  EXPECT_EQ(value("pids", "pids.max"), "16");
  EXPECT_EQ(value("cpu", "cpu.shares"), "1024");
  EXPECT_EQ(cgroup->leaf_dirs().size(), 6u);
  EXPECT_EQ(cgroup->leaf_dirs().front(), host_.hierarchy_mounts[""] + "/parent/c1");
}

TEST_F(OciCgroupDirTest, RelativePathSitsUnderOwnCgroup) {
  for (const auto& [key, own] : host_.own_cgroup_dirs)
    fs::create_directories(own);
  auto cgroup = ContainerCgroup::create(host_, {"c2", true}, {});
  ASSERT_TRUE(cgroup.ok()) << cgroup.error().to_string();
  EXPECT_TRUE(fs::is_directory(fs::path(host_.own_cgroup_dirs["memory"]) / "c2"));
  // Made by create, so remove() takes them; the parents stay.
  ASSERT_TRUE(cgroup->remove().ok());
  EXPECT_FALSE(fs::exists(fs::path(host_.own_cgroup_dirs["memory"]) / "c2"));
  EXPECT_TRUE(fs::is_directory(host_.own_cgroup_dirs["memory"]));
}

TEST_F(OciCgroupDirTest, MissingControlFileIsRefusedByResource) {
  make_leaf("memory", {"memory.limit_in_bytes"});  // no memsw: swap accounting off
  CgroupResources r;
  r.memory_limit = 33554432;
  r.memory_swap = 67108864;
  const auto cgroup = ContainerCgroup::create(host_, {"parent/c1", false}, r);
  ASSERT_FALSE(cgroup.ok());
  EXPECT_NE(cgroup.error().message().find("linux.resources.memory.swap"), std::string::npos);
  EXPECT_NE(cgroup.error().message().find("memory.memsw.limit_in_bytes"), std::string::npos);
  // The leaves this call made are gone (here: the new ones in the other
  // hierarchies); the one that was there stays.
  EXPECT_FALSE(fs::exists(fs::path(host_.hierarchy_mounts["pids"]) / "parent" / "c1"));
  EXPECT_TRUE(fs::exists(fs::path(host_.hierarchy_mounts["memory"]) / "parent" / "c1"));
}

TEST_F(OciCgroupDirTest, PopulatedLeafIsNeverAdopted) {
  make_leaf("pids", {"pids.max"});
  testing::write_file(fs::path(host_.hierarchy_mounts["pids"]) / "parent" / "c1" / "cgroup.procs",
                      "4242\n");
  const auto cgroup = ContainerCgroup::create(host_, {"parent/c1", false}, {});
  ASSERT_FALSE(cgroup.ok());
  EXPECT_NE(cgroup.error().message().find("already holds processes"), std::string::npos);
}

TEST_F(OciCgroupDirTest, MissingHierarchyIsRefusedWhenNeeded) {
  host_.hierarchy_mounts.erase("pids");
  CgroupResources r;
  r.pids_limit = 16;
  const auto cgroup = ContainerCgroup::create(host_, {"parent/c1", false}, r);
  ASSERT_FALSE(cgroup.ok());
  EXPECT_NE(cgroup.error().message().find("linux.resources.pids.limit"), std::string::npos);
}

// runc's fallback: no blkio.weight (not the cfq scheduler) -> the bfq
// scheduler's file; neither -> refused naming the config path and both
// files, never skipped.
TEST_F(OciCgroupDirTest, BlkioWeightFallsBackToBfqElseIsRefused) {
  host_.hierarchy_mounts["blkio"] = (temp_ / "blkio").string();
  fs::create_directories(temp_ / "blkio");
  make_leaf("blkio", {"blkio.bfq.weight"});
  CgroupResources r;
  r.block_io = BlockIoLimits{};
  r.block_io->weight = 300;
  auto cgroup = ContainerCgroup::create(host_, {"parent/c1", false}, r);
  ASSERT_TRUE(cgroup.ok()) << cgroup.error().to_string();
  EXPECT_EQ(value("blkio", "blkio.bfq.weight"), "300");
  const fs::path leaf = fs::path(host_.hierarchy_mounts["blkio"]) / "parent/c1";
  EXPECT_FALSE(fs::exists(leaf / "blkio.weight"));

  fs::remove(leaf / "blkio.bfq.weight");
  const auto refused = ContainerCgroup::create(host_, {"parent/c1", false}, r);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("linux.resources.blockIO.weight"), std::string::npos);
  EXPECT_NE(refused.error().message().find("blkio.weight"), std::string::npos);
  EXPECT_NE(refused.error().message().find("blkio.bfq.weight"), std::string::npos);
}

// A limit whose v1 hierarchy is not mounted (hugetlb on this host) is
// refused naming the path and the hierarchy.
TEST_F(OciCgroupDirTest, HugepagesWithoutHugetlbAreRefused) {
  CgroupResources r;
  r.hugepage_limits = {{"2MB", 2097152}};
  const auto cgroup = ContainerCgroup::create(host_, {"parent/c1", false}, r);
  ASSERT_FALSE(cgroup.ok());
  EXPECT_NE(cgroup.error().message().find("linux.resources.hugepageLimits[0]"), std::string::npos);
  EXPECT_NE(cgroup.error().message().find("hugetlb"), std::string::npos);
}

// The cpuset hierarchy joins only when a limit needs it, and its limits go
// into its own leaf.
TEST_F(OciCgroupDirTest, CpusetJoinsWhenNeeded) {
  host_.hierarchy_mounts["cpuset"] = (temp_ / "cpuset").string();
  make_leaf("cpuset", {"cpuset.cpus", "cpuset.mems"});
  auto without = ContainerCgroup::create(host_, {"parent/c1", false}, {});
  ASSERT_TRUE(without.ok()) << without.error().to_string();
  EXPECT_EQ(without->leaf_dirs().size(), 6u);
  CgroupResources r;
  r.cpuset_cpus = "0";
  r.cpuset_mems = "0";
  auto with = ContainerCgroup::create(host_, {"parent/c1", false}, r);
  ASSERT_TRUE(with.ok()) << with.error().to_string();
  EXPECT_EQ(with->leaf_dirs().size(), 7u);
  EXPECT_EQ(value("cpuset", "cpuset.cpus"), "0");
  EXPECT_EQ(value("cpuset", "cpuset.mems"), "0");
}

// On cgroup v2 every level above the leaf enables the controllers the
// limits need, from the hierarchy's root down.
TEST(OciCgroupV2, EnablesControllersDownToTheLeaf) {
  testing::TempDir temp;
  linux_api::CgroupHost host;
  host.pure_v2 = true;
  host.hierarchy_mounts[""] = temp.path().string();
  for (const fs::path& dir : {temp.path(), temp / "a", temp / "a" / "c1"}) {
    fs::create_directories(dir);
    testing::write_file(dir / "cgroup.subtree_control", "");
    testing::write_file(dir / "cgroup.procs", "");
  }
  testing::write_file(temp / "a" / "c1" / "memory.max", "");
  testing::write_file(temp / "a" / "c1" / "pids.max", "");
  CgroupResources r;
  r.memory_limit = 1 << 20;
  r.pids_limit = 8;
  auto cgroup = ContainerCgroup::create(host, {"a/c1", false}, r);
  ASSERT_TRUE(cgroup.ok()) << cgroup.error().to_string();
  EXPECT_EQ(testing::read_file(temp / "cgroup.subtree_control"), "+memory +pids");
  EXPECT_EQ(testing::read_file(temp / "a" / "cgroup.subtree_control"), "+memory +pids");
  EXPECT_EQ(testing::read_file(temp / "a" / "c1" / "cgroup.subtree_control"), "");
  EXPECT_EQ(testing::read_file(temp / "a" / "c1" / "memory.max"), "1048576");
  EXPECT_EQ(testing::read_file(temp / "a" / "c1" / "pids.max"), "8");
}

}  // namespace
}  // namespace pulsebox::oci
