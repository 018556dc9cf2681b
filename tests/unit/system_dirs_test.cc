// Which directories are refused as a workspace or a state directory unless
// forced (core::system_directory_reason), and that the library refuses them
// itself, before anything is created in them. Nothing here writes outside
// a temporary directory.
#include <gtest/gtest.h>

#include "core/system_dirs.h"
#include "helpers/test_support.h"
#include "pulsebox/error.h"
#include "pulsebox/sandbox.h"
#include "pulsebox/workspace.h"

namespace pulsebox {
namespace {

using core::system_directory_reason;
using testing::TempDir;
namespace fs = std::filesystem;

bool refused(const fs::path& path, const fs::path& home = "/home/someone") {
  return system_directory_reason(path, home).has_value();
}

TEST(SystemDirectories, TheSystemsOwnTreesAreRefusedWhole) {
  for (const char* path :
       {"/etc",           "/etc/",          "/etc/ssh",  "/usr",     "/usr/local/src",
        "/usr/share/doc", "/bin",           "/sbin",     "/lib",     "/lib64",
        "/boot",          "/dev",           "/dev/shm",  "/proc",    "/proc/self",
        "/sys",           "/run",           "/run/lock", "/var/log", "/var/log/apt",
        "/var/spool",     "/var/spool/cron"}) {
    EXPECT_TRUE(refused(path)) << path;
  }
}

TEST(SystemDirectories, SharedDirectoriesAreRefusedButNotWhatIsBelowThem) {
  for (const char* path : {"/", "/var", "/var/lib", "/var/cache", "/tmp", "/var/tmp", "/home",
                           "/srv", "/opt", "/mnt", "/media", "/run/user", "/run/user/1000"}) {
    EXPECT_TRUE(refused(path)) << path;
  }
  for (const char* path :
       {"/var/lib/pulsebox", "/var/lib/jenkins/workspace/job", "/var/tmp/pulsebox-1000",
        "/tmp/project", "/srv/www/site", "/opt/app/src", "/home/someone/project",
        "/run/user/1000/pulsebox", "/var/cache/ci", "/etcetera", "/usrx"}) {
    EXPECT_FALSE(refused(path)) << path;
  }
}

TEST(SystemDirectories, HomeDirectoriesThemselvesAreRefused) {
  EXPECT_TRUE(refused("/root"));
  EXPECT_TRUE(refused("/home/alice"));
  EXPECT_TRUE(refused("/home/someone"));
  EXPECT_FALSE(refused("/home/alice/src"));
  EXPECT_FALSE(refused("/root/project"));
  // $HOME is a home directory wherever it is.
  TempDir home;
  EXPECT_TRUE(refused(home.path(), home.path()));
  EXPECT_FALSE(refused(home.path() / "project", home.path()));
  EXPECT_FALSE(refused(home.path(), ""));
}

TEST(SystemDirectories, SymlinksAndDotDotAreResolvedFirst) {
  TempDir dir;
  fs::create_symlink("/etc", dir / "etc-link");
  fs::create_symlink("/", dir / "root-link");
  EXPECT_TRUE(refused(dir / "etc-link"));
  EXPECT_TRUE(refused(dir / "etc-link" / "not-there-yet"));
  EXPECT_TRUE(refused(dir / "root-link"));
  EXPECT_TRUE(refused(dir.path() / ".." / ".." / "etc"));
  EXPECT_FALSE(refused(dir.path()));
}

// The walk up from a canonical directory checks each ancestor as it is, and
// resolves the home directory once: the same answers as the full check.
TEST(SystemDirectories, TheCheckOfCanonicalPathsAgreesWithTheFullOne) {
  const core::SystemDirectoryCheck check("/home/someone");
  for (const char* path : {"/etc", "/etc/ssh", "/usr/local/src", "/run", "/run/user",
                           "/run/user/1000", "/run/user/1000/pulsebox", "/var", "/var/lib/pulsebox",
                           "/tmp", "/tmp/project", "/root", "/root/project", "/home", "/home/alice",
                           "/home/someone", "/home/someone/project", "/etcetera"}) {
    EXPECT_EQ(check.reason_for_canonical(path), system_directory_reason(path, "/home/someone"))
        << path;
  }
  TempDir dir;
  fs::create_directory(dir / "real-home");
  fs::create_symlink(dir / "real-home", dir / "home-link");
  const fs::path real_home = fs::canonical(dir / "real-home");
  const core::SystemDirectoryCheck linked(dir / "home-link");
  EXPECT_TRUE(linked.reason_for_canonical(real_home)) << "$HOME named through a symlink";
  EXPECT_FALSE(linked.reason_for_canonical(real_home / "project"));
  EXPECT_FALSE(core::SystemDirectoryCheck("").reason_for_canonical(real_home));
}

TEST(SystemDirectories, TheReasonSaysWhy) {
  EXPECT_NE(system_directory_reason("/etc", "")->find("configuration"), std::string::npos);
  EXPECT_NE(system_directory_reason("/root", "")->find(".bashrc"), std::string::npos);
}

TEST(SystemDirectories, TheWorkspaceRefusesOneUnlessAllowed) {
  try {
    Workspace ws("/etc");
    FAIL() << "a workspace in /etc was accepted";
  } catch (const SandboxSecurityError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("the workspace /etc is a system directory"), std::string::npos) << what;
    EXPECT_NE(what.find("--allow-system-dir"), std::string::npos) << what;
  }
  EXPECT_THROW(Workspace("/", default_workspace_policy()), SandboxSecurityError);
  // Constructing a Workspace creates nothing: allowed, /etc stays as it is.
  const Workspace allowed("/etc", default_workspace_policy(), WorkspaceLimits{},
                          SystemDirectoryUse::Allow);
  EXPECT_EQ(allowed.root(), "/etc");
}

TEST(SystemDirectories, TheSandboxRefusesOneBeforeCreatingAnything) {
  const bool had_agent = fs::exists("/etc/.agent");
  SandboxOptions options;
  options.workspace = "/etc";
  EXPECT_THROW(Sandbox sandbox(options), SandboxSecurityError);
  EXPECT_EQ(fs::exists("/etc/.agent"), had_agent);
}

TEST(SystemDirectories, TheNativeBackendRefusesOneAsStateDirectoryUnlessAllowed) {
  const fs::path state = "/etc/pulsebox-unit-test-state";
  ASSERT_FALSE(fs::exists(state));
  EXPECT_THROW(make_native_backend(NativeBackendOptions{.state_dir = state}), SandboxSecurityError);
  // Making the backend creates nothing in its state directory.
  EXPECT_NO_THROW(make_native_backend(
      NativeBackendOptions{.state_dir = state, .allow_system_state_dir = true}));
  EXPECT_FALSE(fs::exists(state));
}

}  // namespace
}  // namespace pulsebox
