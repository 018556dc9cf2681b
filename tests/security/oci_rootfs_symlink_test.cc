// An OCI image is hostile: its `/etc` may be a symlink to a host directory
// (CVE-2021-30465 class). A mount destination under it (a bind onto
// /etc/hosts, a tmpfs below /etc) must resolve inside the container's root:
// resolved as a host path, the container's setup would create the mount
// points in the host directory (and mount over host files). Driven through
// oci/launch/spawn.h; runs as root and as an ordinary user.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "helpers/oci_launch_support.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

// The image's /etc leads to `host` (its absolute path, or as many "../" as
// climb from the root to / and then the path): every mount under /etc must
// leave `host` untouched.
void expect_host_untouched(bool relative) {
  testing::TempDir dir;
  testing::TempDir host;  // stands for the host's /etc
  testing::write_file(host / "passwd", "host file\n");
  const auto host_before = testing::listing(host.path());
  const fs::path root = dir / "rootfs";
  testing::make_busybox_root(root);
  std::string link = host.path().string();
  if (relative) {
    link = link.substr(1);
    for (const auto& part : root) {
      if (part != "/") link = "../" + link;
    }
  }
  fs::create_symlink(link, root / "etc");
  testing::write_file(dir / "hosts", "10.0.0.1 from-the-bundle\n");

  const std::string script =
      "cat /etc/hosts; touch /etc/sub/tmpfs/x && echo tmpfs=rw;"
      "echo passwd=[$(cat /etc/passwd 2>/dev/null)]; exit 0";
  auto plan = testing::busybox_plan(root, script);
  linux_api::MountStep hosts;
  hosts.op = linux_api::MountOp::Bind;
  hosts.source = (dir / "hosts").string();
  hosts.target = "/etc/hosts";
  hosts.recursive = false;
  hosts.stage = "binding /etc/hosts";
  plan.mounts.push_back(hosts);
  linux_api::MountStep tmpfs;
  tmpfs.op = linux_api::MountOp::Tmpfs;
  tmpfs.target = "/etc/sub/tmpfs";
  tmpfs.stage = "mounting a tmpfs on /etc/sub/tmpfs";
  plan.mounts.push_back(tmpfs);
  // A masked path through the symlink names the host's file by its
  // in-root path: it must not be found (nothing there inside the root).
  plan.masked_paths = {"/etc/passwd"};

  const auto run = testing::launch_busybox(plan);
  ASSERT_EQ(run.setup_error, "") << "link " << link;
  EXPECT_NE(run.output.find("10.0.0.1 from-the-bundle"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("tmpfs=rw"), std::string::npos) << run.output;
  // The container never sees the host's file through its /etc.
  EXPECT_NE(run.output.find("passwd=[]"), std::string::npos) << run.output;
  ASSERT_TRUE(WIFEXITED(run.wait_status)) << run.wait_status;
  EXPECT_EQ(WEXITSTATUS(run.wait_status), 0) << run.output;

  // The host directory is exactly as it was: no mount point made in it.
  EXPECT_EQ(testing::listing(host.path()), host_before);
  // The mount points were made inside the root, where the symlink points
  // when resolved there.
  const fs::path inside = root / host.path().relative_path();
  EXPECT_TRUE(fs::is_regular_file(inside / "hosts"));
  EXPECT_TRUE(fs::is_directory(inside / "sub" / "tmpfs"));
}

TEST(OciRootfsSymlinkTest, MountsUnderAnAbsoluteSymlinkToTheHostStayInTheRoot) {
  const std::string why = testing::oci_launch_unavailable();
  PULSEBOX_SKIP_UNLESS(why.empty(), why);
  expect_host_untouched(/*relative=*/false);
}

TEST(OciRootfsSymlinkTest, MountsUnderADotDotSymlinkToTheHostStayInTheRoot) {
  const std::string why = testing::oci_launch_unavailable();
  PULSEBOX_SKIP_UNLESS(why.empty(), why);
  expect_host_untouched(/*relative=*/true);
}

}  // namespace
}  // namespace pulsebox
