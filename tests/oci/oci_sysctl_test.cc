// linux.sysctl (design §2.1 step 5): each key is written inside the
// container, after its namespaces exist and its /proc is mounted, so the
// value reaches the container's own network or ipc namespace and never the
// host's. A value the kernel refuses fails create, naming the key, and
// leaves nothing behind.
#include <unistd.h>

#include "helpers/oci_bundle.h"
#include "helpers/oci_fixture.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

class OciSysctlTest : public testing::OciContainerTest {};

TEST_F(OciSysctlTest, ValuesReachOnlyTheContainer) {
  const std::string forward_before = testing::read_file("/proc/sys/net/ipv4/ip_forward");
  const std::string shmmax_before = testing::read_file("/proc/sys/kernel/shmmax");
  ASSERT_FALSE(forward_before.empty());
  auto b = bundle({"sh", "-c", "cat /proc/sys/net/ipv4/ip_forward /proc/sys/kernel/shmmax"});
  b.config["linux"]["sysctl"] = {{"net.ipv4.ip_forward", "1"}, {"kernel.shmmax", "12345678"}};
  b.write();
  const auto run = oci({"run", "--bundle", b.dir.string(), "c1"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "1\n12345678\n") << run.err;
  // The host's values, read again: unchanged (the project's network tests
  // expect forwarding off).
  EXPECT_EQ(testing::read_file("/proc/sys/net/ipv4/ip_forward"), forward_before);
  EXPECT_EQ(testing::read_file("/proc/sys/kernel/shmmax"), shmmax_before);
  EXPECT_NE(shmmax_before, "12345678\n");
}

TEST_F(OciSysctlTest, ARefusedValueFailsCreateNamingTheKey) {
  const std::string forward_before = testing::read_file("/proc/sys/net/ipv4/ip_forward");
  auto b = bundle({"sh", "-c", "echo never"});
  b.config["linux"]["sysctl"] = {{"net.ipv4.ip_forward", "not-a-number"}};
  b.write();
  const auto created = oci({"create", "--bundle", b.dir.string(), "c1"});
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find("linux.sysctl.net.ipv4.ip_forward"), std::string::npos) << created.err;
  EXPECT_NE(created.err.find("Invalid argument"), std::string::npos) << created.err;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
  EXPECT_EQ(leftover_leaves(), std::vector<std::string>{});
  EXPECT_EQ(testing::read_file(temp_ / "out"), "");
  EXPECT_EQ(testing::read_file("/proc/sys/net/ipv4/ip_forward"), forward_before);
}

TEST_F(OciSysctlTest, AKeyTheKernelLacksFailsCreateNamingTheKey) {
  auto b = bundle({"sh", "-c", "echo never"});
  b.config["linux"]["sysctl"] = {{"net.ipv4.no_such_sysctl", "1"}};
  b.write();
  const auto created = oci({"create", "--bundle", b.dir.string(), "c1"});
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find("linux.sysctl.net.ipv4.no_such_sysctl"), std::string::npos)
      << created.err;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
  EXPECT_EQ(leftover_leaves(), std::vector<std::string>{});
}

// A key is written only through the container's own proc mount: a config
// that bind-mounts another directory inside /proc/sys (here the runtime's
// /proc/sys/kernel over fs/mqueue) would take a key classified for the ipc
// namespace to a file of another (fs.mqueue.domainname to the uts
// namespace's domainname; fs.mqueue.core_pattern would be the host's
// global core_pattern). Such a path is refused, naming the key.
TEST_F(OciSysctlTest, NoMountIsCrossedInsideProc) {
  const std::string domain_before = testing::read_file("/proc/sys/kernel/domainname");
  auto b = bundle({"sh", "-c", "cat /proc/sys/kernel/domainname"});
  b.config["mounts"].push_back({{"destination", "/proc/sys/fs/mqueue"},
                                {"type", "bind"},
                                {"source", "/proc/sys/kernel"},
                                {"options", {"rbind"}}});
  b.config["linux"]["sysctl"] = {{"fs.mqueue.domainname", "via-mqueue"}};
  b.write();
  const auto created = oci({"create", "--bundle", b.dir.string(), "c1"});
  EXPECT_EQ(created.exit_code, 1) << created.err;
  EXPECT_NE(created.err.find("linux.sysctl.fs.mqueue.domainname"), std::string::npos)
      << created.err;
  EXPECT_NE(created.err.find("no mount on the way"), std::string::npos) << created.err;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
  EXPECT_EQ(testing::read_file("/proc/sys/kernel/domainname"), domain_before);
}

}  // namespace
}  // namespace pulsebox
