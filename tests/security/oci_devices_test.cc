// A root container (no user namespace) with CAP_MKNOD must not reach the
// host's disks: it may make a block device node in its own /dev, but the
// cgroup v1 device rules create writes (deny all, then the config's rules
// and the default devices' allows) stop the open. Without those rules
// `mknod /dev/sdx b 8 0` followed by a read opens the host's first disk.
// Root only, on a host with the v1 devices controller (this one is hybrid).
#include <unistd.h>

#include "helpers/oci_fixture.h"
#include "helpers/oci_launch_support.h"
#include "helpers/test_support.h"
#include "linux/cgroup.h"

namespace pulsebox {
namespace {

TEST(OciDevices, RootContainerCannotOpenAHostDisk) {
  PULSEBOX_SKIP_UNLESS_ROOT("device rules matter where mknod works: real root");
  if (const auto why = testing::oci_launch_unavailable(); !why.empty()) GTEST_SKIP() << why;
  const auto host = linux_api::discover_cgroups();
  if (!host.hierarchy_mounts.count("devices")) GTEST_SKIP() << "no cgroup v1 devices controller";
  const auto run = testing::run_with_cap_mknod(
      "busybox mknod /dev/sdx b 8 0 && echo made; "
      "head -c 1 /dev/sdx > /dev/null && echo opened; "
      "head -c 1 /dev/zero | wc -c");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  // The node may or may not be made (mknod needs "m"); it never opens.
  EXPECT_EQ(run.out.find("opened"), std::string::npos) << run.out;
  EXPECT_NE(run.err.find("Operation not permitted"), std::string::npos) << run.err;
  // The default devices still work.
  EXPECT_NE(run.out.find("1\n"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace pulsebox
