// tmpcopyup in a user namespace (oci/tmpcopyup.h): the copy of the image's
// directory keeps its owners as the container sees them. Root makes the
// copy outside the namespace, so each entry is chowned to the host id its
// owner maps to (0 -> 100000 here): inside, 0 and 1000 show as 0 and 1000,
// an id the maps leave out as the overflow id, and the container's root may
// write its own tmpfs. An ordinary user cannot make a tmpfs out there: its
// copy is made inside a user namespace with the container's maps, so its
// own files (0 inside) show as 0.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <random>

#include "helpers/oci_bundle.h"
#include "helpers/oci_launch_support.h"
#include "helpers/test_support.h"
#include "linux/cgroup.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

TEST(OciTmpcopyup, OwnersAreShiftedIntoTheUserNamespace) {
  PULSEBOX_SKIP_UNLESS_ROOT("an ordinary user's tmpcopyup in a user namespace is refused");
  if (const auto why = testing::oci_launch_unavailable(); !why.empty()) GTEST_SKIP() << why;
  testing::TempDir temp;
  // The container's root (host 100000) walks to its rootfs.
  ::chmod(temp.path().c_str(), 0755);
  std::random_device random;
  const std::string subtree = "pulsebox-test-oci-" + std::to_string(random());
  auto bundle = testing::make_oci_bundle(
      temp / "bundle",
      {"sh", "-c",
       "stat -c '%u %g %a %n' /tmp /tmp/zero /tmp/user /tmp/user/file /tmp/unmapped; "
       "touch /tmp/new && stat -c '%u %g %n' /tmp/new"},
      subtree, "c1");
  // The image stays the host root's (nobody inside): its mount points exist.
  fs::create_directories(bundle.dir / "rootfs" / "sys");
  const fs::path image_tmp = bundle.dir / "rootfs" / "tmp";
  fs::create_directories(image_tmp / "user");
  { std::ofstream(image_tmp / "zero") << "0\n"; }
  { std::ofstream(image_tmp / "user" / "file") << "1000\n"; }
  { std::ofstream(image_tmp / "unmapped") << "70000\n"; }
  ASSERT_EQ(::chmod(image_tmp.c_str(), 01777), 0);
  ASSERT_EQ(::chown((image_tmp / "user").c_str(), 1000, 1000), 0);
  ASSERT_EQ(::chmod((image_tmp / "user").c_str(), 0751), 0);
  ASSERT_EQ(::chown((image_tmp / "user" / "file").c_str(), 1000, 1001), 0);
  ASSERT_EQ(::chmod((image_tmp / "user" / "file").c_str(), 0640), 0);
  ASSERT_EQ(::chown((image_tmp / "unmapped").c_str(), 70000, 70000), 0);
  auto& linux = bundle.config["linux"];
  linux["namespaces"].push_back({{"type", "user"}});
  linux["uidMappings"] = {{{"containerID", 0}, {"hostID", 100000}, {"size", 65536}}};
  linux["gidMappings"] = {{{"containerID", 0}, {"hostID", 100000}, {"size", 65536}}};
  bundle.config["mounts"].push_back({{"destination", "/tmp"},
                                     {"type", "tmpfs"},
                                     {"source", "tmpfs"},
                                     {"options", {"nosuid", "nodev", "tmpcopyup"}}});
  bundle.write();
  for (const auto& entry : fs::recursive_directory_iterator(bundle.dir))
    if (entry.is_directory() && entry.path() != image_tmp / "user")
      ::chmod(entry.path().c_str(), entry.path() == image_tmp ? 01777 : 0755);
  const auto run = testing::run_oci_to_files(
      temp / "state", {"run", "--bundle", bundle.dir.string(), "c1"}, temp / "out", temp / "err");
  for (const auto& [key, mount] : linux_api::discover_cgroups().hierarchy_mounts) {
    ::rmdir((fs::path(mount) / subtree / "c1").c_str());
    ::rmdir((fs::path(mount) / subtree).c_str());
  }
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "0 0 1777 /tmp\n"
            "0 0 644 /tmp/zero\n"
            "1000 1000 751 /tmp/user\n"
            "1000 1001 640 /tmp/user/file\n"
            "65534 65534 644 /tmp/unmapped\n"
            "0 0 /tmp/new\n")
      << run.err;
  // The image itself is unchanged.
  struct stat image {};
  ASSERT_EQ(::stat((image_tmp / "user" / "file").c_str(), &image), 0);
  EXPECT_EQ(image.st_uid, 1000u);
  EXPECT_FALSE(fs::exists(image_tmp / "new"));
}

TEST(OciTmpcopyup, AnOrdinaryUsersCopyIsMadeInTheUserNamespace) {
  if (::geteuid() == 0) GTEST_SKIP() << "an ordinary user's case";
  if (const auto why = testing::oci_launch_unavailable(); !why.empty()) GTEST_SKIP() << why;
  testing::TempDir temp;
  // The bundle maps only the caller, as 0: the image's files, the
  // caller's, are root's inside.
  auto bundle = testing::make_oci_bundle(
      temp / "bundle",
      {"sh", "-c",
       "stat -c '%u %g %a %n' /tmp /tmp/sub /tmp/sub/file; cat /tmp/sub/file; "
       "touch /tmp/new && echo writable"},
      "", "c1");
  const fs::path image_tmp = bundle.dir / "rootfs" / "tmp";
  fs::create_directories(image_tmp / "sub");
  { std::ofstream(image_tmp / "sub" / "file") << "from the image\n"; }
  ASSERT_EQ(::chmod(image_tmp.c_str(), 01777), 0);
  ASSERT_EQ(::chmod((image_tmp / "sub").c_str(), 0750), 0);
  ASSERT_EQ(::chmod((image_tmp / "sub" / "file").c_str(), 0640), 0);
  bundle.config["mounts"].push_back({{"destination", "/tmp"},
                                     {"type", "tmpfs"},
                                     {"source", "tmpfs"},
                                     {"options", {"nosuid", "nodev", "tmpcopyup"}}});
  bundle.write();
  const auto run = testing::run_oci_to_files(
      temp / "state", {"run", "--bundle", bundle.dir.string(), "c1"}, temp / "out", temp / "err");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            "0 0 1777 /tmp\n0 0 750 /tmp/sub\n0 0 640 /tmp/sub/file\nfrom the image\nwritable\n")
      << run.err;
  EXPECT_FALSE(fs::exists(image_tmp / "new"));
}

}  // namespace
}  // namespace pulsebox
