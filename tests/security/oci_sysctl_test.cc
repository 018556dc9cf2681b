// linux.sysctl is written through the container's /proc, and the image is
// hostile: its /proc may be a symlink to a host directory, or a plain
// directory with no proc mount on it, holding a sys/net/ipv4/ip_forward of
// its own. Resolved as a path, the write would land in that host file (or
// the image's) instead of the container's network namespace. create must
// fail naming the key and write nothing. Runs as root and as an ordinary
// user.
#include <unistd.h>

#include "helpers/oci_bundle.h"
#include "helpers/oci_launch_support.h"
#include "helpers/oci_state.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

// A file standing for the host's ip_forward under `host`.
fs::path make_fake_proc(const fs::path& host) {
  const fs::path file = host / "sys" / "net" / "ipv4" / "ip_forward";
  fs::create_directories(file.parent_path());
  testing::write_file(file, "0\n");
  return file;
}

testing::OciBundle sysctl_bundle(const fs::path& dir) {
  // No cgroup: nothing here needs one, and the test leaves none behind.
  auto bundle = testing::make_oci_bundle(dir, {"sh", "-c", "echo never"}, "", "c1");
  bundle.config["linux"]["sysctl"] = {{"net.ipv4.ip_forward", "1"}};
  bundle.write();
  return bundle;
}

void expect_refused_and_untouched(const testing::OciFileRun& run, const fs::path& file,
                                  const fs::path& state) {
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.err.find("linux.sysctl.net.ipv4.ip_forward"), std::string::npos) << run.err;
  EXPECT_EQ(testing::read_file(file), "0\n");
  EXPECT_FALSE(fs::exists(state / "c1"));
}

TEST(OciSysctl, ImageProcSymlinkToTheHostIsNeverWritten) {
  const std::string why = testing::oci_launch_unavailable();
  PULSEBOX_SKIP_UNLESS(why.empty(), why);
  testing::TempDir temp;
  testing::TempDir host;  // stands for the host's /proc
  const fs::path file = make_fake_proc(host.path());
  const auto host_before = testing::listing(host.path());
  auto bundle = sysctl_bundle(temp / "bundle");
  const fs::path image_proc = bundle.dir / "rootfs" / "proc";
  fs::remove_all(image_proc);
  fs::create_symlink(host.path(), image_proc);

  const auto run = testing::run_oci_to_files(
      temp / "state", {"run", "--bundle", bundle.dir.string(), "c1"}, temp / "out", temp / "err");
  expect_refused_and_untouched(run, file, temp / "state");
  EXPECT_EQ(testing::listing(host.path()), host_before);
}

TEST(OciSysctl, ImageProcWithoutAProcMountIsNeverWritten) {
  const std::string why = testing::oci_launch_unavailable();
  PULSEBOX_SKIP_UNLESS(why.empty(), why);
  testing::TempDir temp;
  auto bundle = sysctl_bundle(temp / "bundle");
  const fs::path file = make_fake_proc(bundle.dir / "rootfs" / "proc");
  auto& mounts = bundle.config["mounts"];
  mounts.erase(std::remove_if(mounts.begin(), mounts.end(),
                              [](const auto& m) { return m["type"] == "proc"; }),
               mounts.end());
  bundle.write();

  const auto run = testing::run_oci_to_files(
      temp / "state", {"run", "--bundle", bundle.dir.string(), "c1"}, temp / "out", temp / "err");
  expect_refused_and_untouched(run, file, temp / "state");
  EXPECT_NE(run.err.find("not a proc mount"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace pulsebox
