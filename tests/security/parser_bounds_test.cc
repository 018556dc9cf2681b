// Every parser of outside input is bounded: nesting depth, size, and the
// kind of file. The attacks that broke it: a policy nested 100,000 levels
// deep crashed `policy check` and `run --policy` (stack overflow);
// `seccomp check /dev/zero` and a FIFO hung; a seccomp profile with a long
// key over a long array asked for hundreds of gigabytes (its error-line
// table); a FIFO in place of a transaction manifest hung `pulsebox changes`.
// Each CLI run here has a deadline and a memory cap (run_cli_bounded), so a
// regression fails instead of hanging the suite or exhausting the machine.
// Nothing here needs root or a sandbox: it runs the same as root and as an
// ordinary user.
#include <sys/stat.h>

#include "helpers/bounded_cli.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

using testing::BoundedRun;
using testing::TempDir;
namespace fs = std::filesystem;

class ParserBoundsTest : public ::testing::Test {
 protected:
  BoundedRun run(const std::vector<std::string>& args) {
    return testing::run_cli_bounded(
        args, {"PULSEBOX_STATE_DIR=" + state_.path().string(), "PULSEBOX_SERVER=off"});
  }

  // Expects `run` to have ended by itself with `exit_code` and a message
  // containing each of `parts`.
  static void expect_refused(const BoundedRun& run, int exit_code,
                             const std::vector<std::string>& parts) {
    EXPECT_FALSE(run.timed_out) << "still running at the deadline";
    EXPECT_EQ(run.exit_code, exit_code) << run.err.substr(0, 2000);
    for (const auto& part : parts)
      EXPECT_NE(run.err.find(part), std::string::npos)
          << part << " not in: " << run.err.substr(0, 2000);
  }

  static std::string nested(std::size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
  }

  std::string fifo(const std::string& name) {
    const fs::path path = scratch_ / name;
    EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
    return path.string();
  }

  TempDir workspace_;
  TempDir state_;
  TempDir scratch_;
};

TEST_F(ParserBoundsTest, PolicyCheckRefusesAPolicyNested100000Deep) {
  const fs::path policy = scratch_ / "deep.json";
  testing::write_file(policy, "{\"defaults\": " + nested(100000) + "}");
  expect_refused(run({"policy", "check", policy.string()}), 1,
                 {policy.string() + ":1:", "nested 100001 levels deep", "limit of 64"});
}

TEST_F(ParserBoundsTest, RunRefusesAPolicyNested100000Deep) {
  const fs::path policy = scratch_ / "deep.json";
  testing::write_file(policy, nested(100000));
  expect_refused(run({"run", "--policy", policy.string(), "-w", workspace_.path().string(),
                      "--allow-weaker", "limits", "--", "true"}),
                 125, {policy.string() + ":1:", "nested 100000 levels deep", "limit of 64"});
}

TEST_F(ParserBoundsTest, SeccompCheckRefusesDevZero) {
  expect_refused(run({"seccomp", "check", "/dev/zero"}), 125,
                 {"seccomp profile /dev/zero is a character device, not a regular file"});
}

TEST_F(ParserBoundsTest, ChecksRefuseAFifoWithoutWaitingForAWriter) {
  const std::string path = fifo("profile.json");
  expect_refused(run({"seccomp", "check", path}), 125,
                 {"seccomp profile " + path + " is a FIFO, not a regular file"});
  expect_refused(run({"policy", "check", path}), 125,
                 {"policy file " + path + " is a FIFO, not a regular file"});
  expect_refused(run({"run", "--seccomp", path, "-w", workspace_.path().string(), "--allow-weaker",
                      "limits", "--", "true"}),
                 125, {"seccomp profile " + path + " is a FIFO"});
}

TEST_F(ParserBoundsTest, ChecksRefuseADirectory) {
  const std::string dir = scratch_.path().string();
  expect_refused(run({"seccomp", "check", dir}), 125,
                 {"seccomp profile " + dir + " is a directory, not a regular file"});
  expect_refused(run({"policy", "check", dir}), 125,
                 {"policy file " + dir + " is a directory, not a regular file"});
}

TEST_F(ParserBoundsTest, ChecksRefuseAnOversizedFileUnread) {
  const fs::path big = scratch_ / "big.json";
  testing::write_file(big, std::string(5 << 20, ' '));
  expect_refused(run({"seccomp", "check", big.string()}), 125,
                 {"seccomp profile " + big.string() +
                  " is 5242880 bytes, over the limit of "
                  "4194304 bytes"});
  expect_refused(run({"policy", "check", big.string()}), 125,
                 {"policy file " + big.string() +
                  " is 5242880 bytes, over the limit of "
                  "4194304 bytes"});
}

// The profile is 3.2 MB; every value's full path (200 KB of key each, for
// 1.5 million values) was kept to name lines in error messages.
TEST_F(ParserBoundsTest, SeccompProfileWithALongKeyOverALongArrayStaysSmall) {
  const fs::path profile = scratch_ / "wide.json";
  std::string text =
      "{\"defaultAction\": \"SCMP_ACT_ALLOW\",\n\"" + std::string(200000, 'k') + "\": [0";
  for (int i = 1; i < 1500000; ++i)
    text += ",0";
  text += "]}";
  testing::write_file(profile, text);
  expect_refused(run({"seccomp", "check", profile.string()}), 1,
                 {profile.string() + ":2: kkkk", "unknown key"});
}

class DamagedTransactionTest : public ParserBoundsTest {
 protected:
  fs::path manifest() const { return workspace_.path() / ".agent/transactions/tx-1/manifest.json"; }
  void SetUp() override {
    ParserBoundsTest::SetUp();
    fs::create_directories(manifest().parent_path());
  }
};

TEST_F(DamagedTransactionTest, ADeepManifestIsReportedAsDamaged) {
  testing::write_file(manifest(),
                      "{\"id\": \"tx-1\", \"created\": \"x\", \"next_blob\": 1, "
                      "\"entries\": " +
                          nested(100000) + "}");
  const std::string ws = workspace_.path().string();
  const auto listed = run({"changes", "-w", ws});
  EXPECT_FALSE(listed.timed_out);
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  for (const char* command : {"diff", "commit"}) {
    SCOPED_TRACE(command);
    expect_refused(
        run({command, "-w", ws, "tx-1"}), 125,
        {manifest().string() + " is damaged", "nested 100001 levels deep", "limit of 64"});
  }
  // A damaged transaction can only go, and it does.
  const auto discarded = run({"discard", "-w", ws, "tx-1"});
  EXPECT_EQ(discarded.exit_code, 0) << discarded.err;
  EXPECT_FALSE(fs::exists(manifest().parent_path()));
}

TEST_F(DamagedTransactionTest, AFifoManifestDoesNotBlock) {
  ASSERT_EQ(::mkfifo(manifest().c_str(), 0600), 0);
  const std::string ws = workspace_.path().string();
  const auto listed = run({"changes", "-w", ws});
  EXPECT_FALSE(listed.timed_out) << "pulsebox changes waited for a writer";
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  expect_refused(run({"diff", "-w", ws, "tx-1"}), 125,
                 {manifest().string() + " is damaged", "is a FIFO, not a regular file"});
}

}  // namespace
}  // namespace pulsebox
