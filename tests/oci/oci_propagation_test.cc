// Mount propagation (linux.rootfsPropagation and the propagation options of
// bind mounts). The host side is a private mount namespace this test makes
// with `unshare -m` around the runtime, never the machine's own: in it a
// shared tmpfs is the bind's source, and a tmpfs is mounted under it once the
// container is up.
//   - rslave: the container sees that later mount;
//   - rprivate (podman's -v default): it does not;
//   - nothing the container mounts reaches the test's namespace, and
//     rootfsPropagation rprivate/rslave are applied (shared is refused with
//     why).
// Root only (mount needs CAP_SYS_ADMIN in the test's namespace).
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "helpers/oci_bundle.h"
#include "helpers/oci_launch_support.h"
#include "helpers/oci_state.h"
#include "helpers/test_support.h"
#include "linux/cgroup.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

class OciPropagationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PULSEBOX_SKIP_UNLESS_ROOT("mounts in a mount namespace of the test's own");
    if (const auto why = testing::oci_launch_unavailable(); !why.empty()) GTEST_SKIP() << why;
    if (std::system("command -v unshare >/dev/null 2>&1") != 0)
      GTEST_SKIP() << "unshare (util-linux) is missing";
    host_ = linux_api::discover_cgroups();
    std::random_device random;
    subtree_ = "pulsebox-test-oci-" + std::to_string(random());
    fs::create_directories(temp_ / "src");
  }
  void TearDown() override {
    (void)testing::run_oci(temp_ / "state", {"delete", "--force", "c1"});
    for (const auto& [key, mount] : host_.hierarchy_mounts) {
      ::rmdir((fs::path(mount) / subtree_ / "c1").c_str());
      ::rmdir((fs::path(mount) / subtree_).c_str());
    }
  }

  // In a new private mount namespace: a shared tmpfs on src, the container
  // run with src bound on /vol; once it has made /vol/ready, a tmpfs with a
  // marker is mounted on src/sub, and /vol/go lets the container look. Then
  // the script lists its own mounts under src (the container's must not
  // be there). Returns the container's output ("mounted" once its own
  // mount on /vol/inner worked, then "seen" or "unseen").
  std::string run_around(const std::vector<std::string>& bind_options,
                         const std::string& rootfs_propagation, std::string* err,
                         std::string* mounts_after) {
    auto bundle = testing::make_oci_bundle(
        temp_ / ("bundle" + std::to_string(++runs_)),
        {"sh", "-c",
         "mount -t tmpfs inner /vol/inner && echo mounted; touch /vol/ready; i=0; "
         "while [ ! -e /vol/go ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done; "
         "if [ -e /vol/sub/marker ]; then echo seen; else echo unseen; fi"},
        subtree_, "c1");
    bundle.config["mounts"].push_back({{"destination", "/vol"},
                                       {"type", "bind"},
                                       {"source", (temp_ / "src").string()},
                                       {"options", bind_options}});
    if (!rootfs_propagation.empty())
      bundle.config["linux"]["rootfsPropagation"] = rootfs_propagation;
    // The container may mount (to show that its mounts stay inside).
    for (const char* set : {"bounding", "effective", "permitted"})
      bundle.config["process"]["capabilities"][set].push_back("CAP_SYS_ADMIN");
    bundle.write();
    const fs::path src = temp_ / "src";
    const std::string script =
        "set -e\n"
        "mount -t tmpfs pulsebox-test-src '" +
        src.string() +
        "'\n"
        "mount --make-shared '" +
        src.string() +
        "'\n"
        "mkdir '" +
        src.string() + "/sub' '" + src.string() +
        "/inner'\n"
        "'" +
        std::getenv("PULSEBOX_BIN") + "' oci --root '" + (temp_ / "state").string() +
        "' run --bundle '" + bundle.dir.string() + "' c1 >'" + (temp_ / "out").string() + "' 2>'" +
        (temp_ / "err").string() +
        "' &\n"
        "pid=$!\n"
        "i=0; while [ ! -e '" +
        src.string() +
        "/ready' ] && [ $i -lt 500 ] && "
        "kill -0 $pid 2>/dev/null; do sleep 0.02; i=$((i+1)); done\n"
        "mount -t tmpfs pulsebox-test-sub '" +
        src.string() +
        "/sub'\n"
        "echo x > '" +
        src.string() +
        "/sub/marker'\n"
        "touch '" +
        src.string() +
        "/go'\n"
        "wait $pid || true\n"
        "grep ' " +
        src.string() + "/inner ' /proc/self/mountinfo > '" + (temp_ / "inner").string() +
        "' || true\n";
    testing::write_file(temp_ / "script", script);
    const std::string command = "timeout -s KILL 60 unshare -m --propagation private sh '" +
                                (temp_ / "script").string() + "'";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    *err = testing::read_file(temp_ / "err");
    *mounts_after = testing::read_file(temp_ / "inner");
    return testing::read_file(temp_ / "out");
  }

  testing::TempDir temp_;
  int runs_ = 0;
  linux_api::CgroupHost host_;
  std::string subtree_;
};

TEST_F(OciPropagationTest, RslaveBindSeesTheHostsLaterMount) {
  std::string err, inner;
  const auto out = run_around({"rbind", "rslave"}, "", &err, &inner);
  EXPECT_EQ(out, "mounted\nseen\n") << err;
  // The container's own mount on /vol/inner stayed in the container.
  EXPECT_EQ(inner, "");
}

TEST_F(OciPropagationTest, RprivateBindDoesNot) {
  std::string err, inner;
  const auto out = run_around({"rbind", "rprivate"}, "", &err, &inner);
  EXPECT_EQ(out, "mounted\nunseen\n") << err;
  EXPECT_EQ(inner, "");
}

TEST_F(OciPropagationTest, RootfsPropagation) {
  std::string err, inner;
  // rprivate on the root takes the bind (a submount) along.
  EXPECT_EQ(run_around({"rbind"}, "rprivate", &err, &inner), "mounted\nunseen\n") << err;
  EXPECT_EQ(inner, "");
  (void)testing::run_oci(temp_ / "state", {"delete", "--force", "c1"});
  fs::remove(temp_ / "out");
  EXPECT_EQ(run_around({"rbind"}, "rslave", &err, &inner), "mounted\nseen\n") << err;
  EXPECT_EQ(inner, "");
  (void)testing::run_oci(temp_ / "state", {"delete", "--force", "c1"});
  fs::remove(temp_ / "out");
  // shared is refused with why, before anything runs.
  EXPECT_EQ(run_around({"rbind"}, "rshared", &err, &inner), "");
  EXPECT_NE(err.find("linux.rootfsPropagation"), std::string::npos) << err;
  EXPECT_NE(err.find("rshared"), std::string::npos) << err;
  EXPECT_NE(err.find("never lets the container's mounts propagate back"), std::string::npos) << err;
}

}  // namespace
}  // namespace pulsebox
