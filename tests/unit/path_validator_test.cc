#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "helpers/test_support.h"
#include "pulsebox/error.h"
#include "pulsebox/path_validator.h"
#include "workspace/safe_open.h"

namespace pulsebox {
namespace {

using testing::TempDir;
using testing::write_file;

class PathValidatorTest : public ::testing::TestWithParam<bool> {
 protected:
  PathValidatorTest() {
    write_file(workspace_ / "ws/src/main.cc", "int main() {}\n");
    write_file(workspace_ / "outside/secret.txt", "TOP SECRET");
  }
  PathValidator validator(PathValidator::Options options = {}) const {
    options.force_component_walk = GetParam();
    return PathValidator(workspace_ / "ws", options);
  }
  TempDir workspace_;
};

TEST_P(PathValidatorTest, ReadsRegularFilesAsBytes) {
  const std::string binary("\x00\x01\xff\xfe binary\n", 12);
  write_file(workspace_ / "ws/blob.bin", binary);
  EXPECT_EQ(validator().read("blob.bin"), binary);
  EXPECT_EQ(validator().read("./src//main.cc"), "int main() {}\n");
}

TEST_P(PathValidatorTest, LexicalRefusals) {
  const auto v = validator();
  for (const std::string& bad :
       std::vector<std::string>{"", "/etc/passwd", "../outside/secret.txt", "src/../../x", "..",
                                "src\\main.cc", "C:\\x", std::string("a\0b", 3), ".", "./"}) {
    EXPECT_THROW((void)v.read(bad), SandboxSecurityError) << "path: " << bad;
  }
  EXPECT_EQ(v.validate("./a//b/"), "a/b");
}

TEST_P(PathValidatorTest, SymlinkOutsideIsRefused) {
  std::filesystem::create_symlink(workspace_ / "outside/secret.txt", workspace_ / "ws/abs-link");
  std::filesystem::create_symlink("../outside/secret.txt", workspace_ / "ws/rel-link");
  std::filesystem::create_symlink(workspace_ / "outside", workspace_ / "ws/dir-link");
  const auto v = validator();
  EXPECT_THROW((void)v.read("abs-link"), SandboxSecurityError);
  EXPECT_THROW((void)v.read("rel-link"), SandboxSecurityError);
  EXPECT_THROW((void)v.read("dir-link/secret.txt"), SandboxSecurityError);
}

TEST_P(PathValidatorTest, ProcMagicLinksAreRefused) {
  // /proc/self/root is a magic link to "/": following it would escape.
  const auto external = PathValidator(
      workspace_ / "ws", {.allowed_external_reads = {"/proc"}, .force_component_walk = GetParam()});
  EXPECT_THROW((void)external.read_external("/proc/self/root/etc/hostname"), SandboxError);
}

TEST_P(PathValidatorTest, OnlyRegularFiles) {
  const auto v = validator();
  EXPECT_THROW((void)v.read("src"), SandboxSecurityError);
  ASSERT_EQ(::mkfifo((workspace_ / "ws/fifo").c_str(), 0600), 0);
  EXPECT_THROW((void)v.read("fifo"), SandboxSecurityError);  // must not block either
}

TEST_P(PathValidatorTest, SizeLimit) {
  write_file(workspace_ / "ws/big", std::string(2048, 'x'));
  EXPECT_THROW((void)validator({.max_file_size = 1024}).read("big"), SandboxResourceError);
  EXPECT_EQ(validator({.max_file_size = 2048}).read("big").size(), 2048u);
}

TEST_P(PathValidatorTest, ExternalReadRoots) {
  const auto v = validator({.allowed_external_reads = {workspace_ / "outside"}});
  EXPECT_EQ(v.read_external(workspace_ / "outside/secret.txt"), "TOP SECRET");
  EXPECT_THROW((void)v.read_external(workspace_ / "outside/../ws/src/main.cc"),
               SandboxSecurityError);
  EXPECT_THROW((void)v.read_external("/etc/hostname"), SandboxSecurityError);
  EXPECT_THROW((void)v.read_external("relative/path"), SandboxSecurityError);
}

// A symlink is swapped between an inside target and an outside one while
// reads run. Whatever the interleaving, a read returns the inside content or
// fails; it never returns the outside file.
TEST_P(PathValidatorTest, SymlinkSwapRaceNeverEscapes) {
  write_file(workspace_ / "ws/inside.txt", "inside");
  const auto link = workspace_ / "ws/target";
  const auto staging = workspace_ / "ws/target.tmp";
  std::atomic<bool> stop{false};
  std::thread swapper([&] {
    bool outside = false;
    for (int i = 0; i < 200000 && !stop.load(); ++i) {
      std::error_code ec;
      std::filesystem::remove(staging, ec);
      if (outside) {
        std::filesystem::create_symlink(workspace_ / "outside/secret.txt", staging, ec);
      } else {
        std::filesystem::create_symlink("inside.txt", staging, ec);
      }
      ::rename(staging.c_str(), link.c_str());  // atomic replace
      outside = !outside;
    }
  });
  const auto v = validator();
  int inside_reads = 0;
  int refused = 0;
  for (int i = 0; i < 20000; ++i) {
    try {
      const std::string content = v.read("target");
      ASSERT_NE(content, "TOP SECRET") << "read escaped the workspace on iteration " << i;
      ASSERT_EQ(content, "inside");
      ++inside_reads;
    } catch (const SandboxError&) {
      ++refused;
    }
  }
  stop = true;
  swapper.join();
  EXPECT_EQ(inside_reads + refused, 20000);
  EXPECT_GT(refused, 0) << "the swap never raced the reads";
}

INSTANTIATE_TEST_SUITE_P(ResolveModes, PathValidatorTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param_info) {
                           return param_info.param ? std::string("ComponentWalk")
                                                   : std::string("Openat2");
                         });

TEST(SafeOpenTest, Openat2IsAvailable) {
  PULSEBOX_SKIP_UNLESS(workspace::openat2_supported(),
                       "openat2(2) is not available on this kernel");
  SUCCEED();
}

TEST(SafeOpenTest, Openat2FollowsSymlinksThatStayInside) {
  PULSEBOX_SKIP_UNLESS(workspace::openat2_supported(),
                       "openat2(2) is not available on this kernel");
  TempDir dir;
  write_file(dir / "ws/real.txt", "real");
  std::filesystem::create_symlink("real.txt", dir / "ws/alias");
  EXPECT_EQ(PathValidator(dir / "ws").read("alias"), "real");
  // The component walk is stricter and refuses every symlink.
  EXPECT_THROW((void)PathValidator(dir / "ws", {.force_component_walk = true}).read("alias"),
               SandboxSecurityError);
}

}  // namespace
}  // namespace pulsebox
