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
