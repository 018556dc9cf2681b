// The launch plan as data: mount steps, exec candidates, bind checks, id
// ranges. No privileges needed; the real thing runs in tests/integration.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "helpers/test_support.h"
#include "linux/userns.h"
#include "runtime/plan.h"
#include "runtime/sync_channel.h"

namespace pulsebox::runtime {
namespace {

using linux_api::MountOp;
using linux_api::MountStep;
using testing::TempDir;

std::vector<MountStep> steps_for(const MountLayout& layout) {
  auto steps = build_mount_steps(layout);
  EXPECT_TRUE(steps.ok()) << (steps.ok() ? "" : steps.error().to_string());
  return steps.ok() ? std::move(steps).value() : std::vector<MountStep>{};
}

std::ptrdiff_t index_of(const std::vector<MountStep>& steps, const std::string& stage) {
  const auto it = std::find_if(steps.begin(), steps.end(),
                               [&](const MountStep& step) { return step.stage == stage; });
  return it == steps.end() ? -1 : it - steps.begin();
}

class PlanTest : public ::testing::Test {
 protected:
  MountLayout layout() {
    MountLayout l;
    l.workspace = workspace_.path();
    l.run_dir = run_.path();
    l.mount_points = mount_points_.path();
    l.system_paths = {"/usr", "/bin", "/etc"};
    l.hidden_paths = {"/etc/shadow", "/etc/does-not-exist", "/usr/share/nothing-here"};
    return l;
  }
  TempDir workspace_;
  TempDir run_;
  TempDir mount_points_;
};

TEST_F(PlanTest, TheRootComesFirstAndEveryTargetIsInsideIt) {
  const auto steps = steps_for(layout());
  ASSERT_FALSE(steps.empty());
  // Before the root: the read-only mask sources, bound on themselves.
  const std::string empty = (mount_points_.path() / "empty").string();
  const std::string empty_dir = (mount_points_.path() / "empty-dir").string();
  ASSERT_GE(steps.size(), 5u);
  EXPECT_EQ(steps[0].op, MountOp::Bind);
  EXPECT_EQ(steps[0].target, empty);
  EXPECT_EQ(steps[1].op, MountOp::ReadOnly);
  EXPECT_EQ(steps[2].target, empty_dir);
  EXPECT_EQ(steps[3].op, MountOp::ReadOnly);
  EXPECT_EQ(steps[4].op, MountOp::Tmpfs);
  const std::string root = (mount_points_.path() / "root").string();
  EXPECT_EQ(steps[4].target, root);
  for (std::size_t i = 4; i < steps.size(); ++i) {
    const auto& step = steps[i];
    EXPECT_EQ(step.target.rfind(root, 0), 0u) << step.stage << " targets " << step.target;
    EXPECT_FALSE(step.stage.empty());
  }
}

// init makes the base steps before the staging directory exists: none may
// touch it or the workspace; the workspace part holds the overlay and its masks.
TEST_F(PlanTest, TheBaseStepsNeedNoStaging) {
  auto l = layout();
  std::filesystem::create_directories(workspace_ / ".agent");
  l.hidden_workspace_paths = {"secret.txt"};
  testing::write_file(workspace_ / "secret.txt", "x");
  TempDir data;
  l.binds = {{data.path(), "/data", false}};
  auto base = build_base_mount_steps(l);
  ASSERT_TRUE(base.ok()) << base.error().to_string();
  const std::string run = run_.path().string();
  const std::string workspace = workspace_.path().string();
  for (const auto& step : base.value()) {
    for (const std::string* text : {&step.target, &step.source, &step.data}) {
      EXPECT_EQ(text->find(run), std::string::npos) << step.stage;
      EXPECT_EQ(text->find(workspace), std::string::npos) << step.stage;
    }
  }
  EXPECT_GE(index_of(base.value(), "bind-mounting " + data.path().string() + " on /data"), 0)
      << "extra binds are base steps";
  const auto rest = build_workspace_mount_steps(l);
  EXPECT_EQ(index_of(rest, "mounting overlay on /workspace"), 1) << "after creating /workspace";
  const std::string empty_dir = (mount_points_.path() / "empty-dir").string();
  const std::string empty = (mount_points_.path() / "empty").string();
  EXPECT_EQ(index_of(rest, "bind-mounting " + empty_dir + " on /workspace/.agent"), -1)
      << ".agent is hidden by the whiteout layer, not a mount point";
  EXPECT_GE(index_of(rest, "bind-mounting " + empty + " on /workspace/secret.txt"), 0);
  EXPECT_EQ(steps_for(l).size(), base.value().size() + rest.size());
}

TEST_F(PlanTest, MasksAreSingleBindsOfTheReadOnlySources) {
  const auto steps = steps_for(layout());
  const std::string empty = (mount_points_.path() / "empty").string();
  const std::string empty_dir = (mount_points_.path() / "empty-dir").string();
  std::size_t masks = 0;
  for (const auto& step : steps) {
    if (step.op != MountOp::Bind || (step.source != empty && step.source != empty_dir)) continue;
    if (step.target == step.source) continue;  // the source itself
    ++masks;
    EXPECT_FALSE(step.recursive) << step.stage;
    EXPECT_TRUE(step.optional) << step.stage << ": a path this kernel lacks is skipped";
  }
  EXPECT_GE(masks, 8u) << "/etc/shadow and crun's /proc list";
  EXPECT_GE(index_of(steps, "bind-mounting " + empty_dir + " on /proc/acpi"), 0);
  EXPECT_GE(index_of(steps, "bind-mounting " + empty + " on /proc/kcore"), 0);
  // No mask needs a remount of its own: the bind inherits read-only.
  for (const auto& mask : steps) {
    if (mask.op != MountOp::Bind || mask.target == mask.source ||
        (mask.source != empty && mask.source != empty_dir)) {
      continue;
    }
    for (const auto& step : steps)
      EXPECT_FALSE(step.op == MountOp::ReadOnly && step.target == mask.target) << step.stage;
  }
}

TEST_F(PlanTest, SystemDirectoriesAreBoundReadOnlyAndSymlinksKept) {
  const auto steps = steps_for(layout());
  const auto bind = index_of(steps, "bind-mounting /usr on /usr");
  const auto read_only = index_of(steps, "making /usr read-only");
  ASSERT_GE(bind, 0);
  EXPECT_EQ(read_only, bind + 1);
  EXPECT_TRUE(steps[static_cast<std::size_t>(read_only)].recursive);
  std::error_code ec;
  if (std::filesystem::is_symlink("/bin", ec)) {
    const auto link = index_of(steps, "linking /bin");
    ASSERT_GE(link, 0);
    EXPECT_EQ(steps[static_cast<std::size_t>(link)].source,
              std::filesystem::read_symlink("/bin").string());
  }
}

TEST_F(PlanTest, OnlyExistingHiddenPathsUnderSystemDirectoriesAreMasked) {
  const auto steps = steps_for(layout());
  const std::string empty = (mount_points_.path() / "empty").string();
  const auto shadow = index_of(steps, "bind-mounting " + empty + " on /etc/shadow");
  EXPECT_GE(shadow, 0);
  EXPECT_GT(shadow, index_of(steps, "making /etc read-only")) << "masks go over the bind";
  EXPECT_EQ(index_of(steps, "bind-mounting " + empty + " on /etc/does-not-exist"), -1);
}

TEST_F(PlanTest, TheWorkspaceIsAnOverlayWithEscapedPathsAndAgentHidden) {
  auto l = layout();
  std::filesystem::create_directories(workspace_ / "a,b:c");
  std::filesystem::create_directories(workspace_ / ".agent");
  l.workspace = workspace_ / "a,b:c";
  auto steps = steps_for(l);
  auto overlay = index_of(steps, "mounting overlay on /workspace");
  ASSERT_GE(overlay, 0);
  const auto& data = steps[static_cast<std::size_t>(overlay)].data;
  // .agent/ is not there at all: a whiteout layer above the workspace, no
  // mask (an empty mount point the sandbox could list and not remove).
  EXPECT_NE(data.find("lowerdir=" + (mount_points_.path() / "agent-whiteout").string() + ":" +
                      workspace_.path().string() + "/a\\,b\\:c,"),
            std::string::npos)
      << data;
  EXPECT_NE(data.find(",userxattr,index=off,xino=off,volatile"), std::string::npos) << data;
  for (const auto& step : steps)
    EXPECT_EQ(step.target.find("/workspace/.agent"), std::string::npos) << step.stage;

  l.hide_agent_dir = false;
  steps = steps_for(l);
  overlay = index_of(steps, "mounting overlay on /workspace");
  EXPECT_EQ(steps[static_cast<std::size_t>(overlay)].data.find("agent-whiteout"),
            std::string::npos);
}

TEST_F(PlanTest, HomeIsAPrivateTmpfsUnlessAHostDirectoryIsBoundThere) {
  auto l = layout();
  l.home_uid = 1234;
  l.home_gid = 5678;
  auto base = build_base_mount_steps(l);
  ASSERT_TRUE(base.ok()) << base.error().to_string();
  const auto home = index_of(base.value(), "mounting tmpfs on /home/sandbox");
  ASSERT_GE(home, 0);
  EXPECT_EQ(base.value()[static_cast<std::size_t>(home)].data, "mode=0700,uid=1234,gid=5678");

  TempDir kept;
  l.binds = {{kept.path(), "/home/sandbox", true}};
  base = build_base_mount_steps(l);
  ASSERT_TRUE(base.ok()) << base.error().to_string();
  EXPECT_EQ(index_of(base.value(), "mounting tmpfs on /home/sandbox"), -1);
  EXPECT_GE(index_of(base.value(), "bind-mounting " + kept.path().string() + " on /home/sandbox"),
            0);
  // Root's layout: attached from an idmapped tree after PlanReady instead.
  l.idmap_home = true;
  l.idmapped_home_fd = 43;
  base = build_base_mount_steps(l);
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(index_of(base.value(), "bind-mounting " + kept.path().string() + " on /home/sandbox"),
            -1);
  const auto rest = build_workspace_mount_steps(l);
  const auto attach = index_of(rest, "attaching the idmapped home");
  ASSERT_GE(attach, 0);
  EXPECT_EQ(rest[static_cast<std::size_t>(attach)].fd, 43);
}

TEST_F(PlanTest, ADiskLimitPutsTheChangesOnATmpfsOfThatSize) {
  auto l = layout();
  l.changes_size_bytes = 1 << 20;
  l.upper_mode = 0751;
  const auto steps = build_workspace_mount_steps(l);
  const std::string changes = (mount_points_.path() / "changes").string();
  const auto tmpfs = index_of(steps, "mounting the tmpfs for the run's changes (--disk)");
  const auto upper = index_of(steps, "creating the upper directory on the tmpfs");
  const auto overlay = index_of(steps, "mounting overlay on /workspace");
  ASSERT_GE(tmpfs, 0);
  EXPECT_LT(tmpfs, upper);
  EXPECT_LT(upper, overlay);
  EXPECT_EQ(steps[static_cast<std::size_t>(tmpfs)].target, changes);
  EXPECT_EQ(steps[static_cast<std::size_t>(tmpfs)].data, "mode=0700,size=1048576");
  EXPECT_EQ(steps[static_cast<std::size_t>(upper)].mode, 0751u);
  const auto& data = steps[static_cast<std::size_t>(overlay)].data;
  EXPECT_NE(data.find(",upperdir=" + changes + "/upper,workdir=" + changes + "/work,"),
            std::string::npos)
      << data;
  EXPECT_EQ(data.find(run_.path().string()), std::string::npos) << "nothing on the state disk";
}

TEST_F(PlanTest, TmpAndShmAreCappedWhenASizeIsGiven) {
  auto l = layout();
  l.tmpfs_size_bytes = 1 << 20;
  const auto steps = steps_for(l);
  for (const char* stage : {"mounting tmpfs on /tmp", "mounting tmpfs on /dev/shm"}) {
    const auto index = index_of(steps, stage);
    ASSERT_GE(index, 0) << stage;
    EXPECT_EQ(steps[static_cast<std::size_t>(index)].data, "mode=1777,size=1048576") << stage;
  }
}

TEST_F(PlanTest, AnIdmappedWorkspaceIsAttachedBeforeTheOverlayUsesIt) {
  auto l = layout();
  l.idmapped_workspace_fd = 42;
  const auto steps = steps_for(l);
  const auto attach = index_of(steps, "attaching the idmapped workspace");
  const auto overlay = index_of(steps, "mounting overlay on /workspace");
  ASSERT_GE(attach, 0);
  EXPECT_LT(attach, overlay);
  EXPECT_EQ(steps[static_cast<std::size_t>(attach)].fd, 42);
  EXPECT_NE(steps[static_cast<std::size_t>(overlay)].data.find(
                ":" + (mount_points_.path() / "lower").string() + ","),
            std::string::npos);
}

TEST_F(PlanTest, ExtraBindsAreCheckedAndMadeReadOnlyUnlessWritable) {
  auto l = layout();
  l.binds = {{workspace_.path(), "/data/in", false}, {run_.path(), "/tmp/out", true}};
  const auto steps = steps_for(l);
  const std::string ws = std::filesystem::canonical(workspace_.path()).string();
  const auto in = index_of(steps, "bind-mounting " + ws + " on /data/in");
  ASSERT_GE(in, 0);
  EXPECT_EQ(steps[static_cast<std::size_t>(in + 1)].op, MountOp::ReadOnly);
  EXPECT_GE(index_of(steps, "creating /data"), 0);
  const auto out = index_of(
      steps, "bind-mounting " + std::filesystem::canonical(run_.path()).string() + " on /tmp/out");
  ASSERT_GE(out, 0);
  const auto next = static_cast<std::size_t>(out + 1);
  EXPECT_TRUE(next == steps.size() || steps[next].op != MountOp::ReadOnly);

  for (const std::string bad :
       {"relative", "/", "/workspace/x", "/proc/x", "/dev/x", "/usr/x", "/data/../etc", "/data/",
        "/data/.", "/data/./x", "/data//x", "/..", "/data/.."}) {
    EXPECT_NE(check_bind_target(bad, l.system_paths), "") << bad;
  }
  for (const std::string good : {"/root/.cache", "/.config", "/data/..x/.y", "/opt/.../z"}) {
    EXPECT_EQ(check_bind_target(good, l.system_paths), "") << good;
  }
  l.binds = {{workspace_ / "missing", "/data", false}};
  auto missing = build_mount_steps(l);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind(), core::ErrorKind::kInvalidInput);
}

// A file is bound on a file the plan creates, after its parents; the host
// side is resolved when the plan is made, so the step binds what was checked.
TEST_F(PlanTest, ABoundFileGetsAFileMadeForItAndItsResolvedSource) {
  auto l = layout();
  TempDir data;
  testing::write_file(data / "real.txt", "x");
  std::filesystem::create_symlink(data / "real.txt", data / "link.txt");
  l.binds = {{data / "link.txt", "/data/sub/in.txt", false}};
  const auto steps = steps_for(l);
  const auto data_dir = index_of(steps, "creating /data");
  const auto sub_dir = index_of(steps, "creating /data/sub");
  const auto file = index_of(steps, "creating /data/sub/in.txt");
  const std::string real = std::filesystem::canonical(data / "real.txt").string();
  const auto bind = index_of(steps, "bind-mounting " + real + " on /data/sub/in.txt");
  ASSERT_GE(data_dir, 0);
  ASSERT_GT(sub_dir, data_dir);
  ASSERT_GT(file, sub_dir);
  ASSERT_EQ(bind, file + 1) << "bound on the file just made";
  const auto& made = steps[static_cast<std::size_t>(file)];
  EXPECT_EQ(made.op, MountOp::MakeFile);
  EXPECT_EQ(made.mode, 0644u);
  EXPECT_EQ(made.target, (mount_points_.path() / "root").string() + "/data/sub/in.txt");
  const auto& bound = steps[static_cast<std::size_t>(bind)];
  EXPECT_EQ(bound.source, real) << "the symlink resolved";
  EXPECT_FALSE(bound.optional) << "a bind that cannot be made fails the run";
  const auto& read_only = steps[static_cast<std::size_t>(bind + 1)];
  EXPECT_EQ(read_only.op, MountOp::ReadOnly);
  EXPECT_EQ(read_only.target, bound.target);
}

// A bind under /tmp goes over the private /tmp, not under it (where the
// tmpfs would hide it).
TEST_F(PlanTest, ExtraBindsComeAfterTheDirectoriesTheSandboxBuilds) {
  auto l = layout();
  l.binds = {{run_.path(), "/tmp/out", true}};
  const auto steps = steps_for(l);
  const auto out = index_of(
      steps, "bind-mounting " + std::filesystem::canonical(run_.path()).string() + " on /tmp/out");
  ASSERT_GE(out, 0);
  for (const char* stage : {"mounting tmpfs on /tmp", "mounting proc on /proc",
                            "mounting devpts on /dev/pts", "mounting tmpfs on /dev/shm"}) {
    EXPECT_LT(index_of(steps, stage), out) << stage;
  }
}

// Masks bind the empty directory over directories, the empty file over
// files; a symlink is not followed (the bind would land on its target) and a
// path outside the system directories is not visible to mask.
TEST_F(PlanTest, HiddenPathsAreMaskedByTheirTypeAndNeverThroughASymlink) {
  TempDir host;
  std::filesystem::create_directories(host / "sys/secret-dir");
  testing::write_file(host / "sys/secret-file", "x");
  std::filesystem::create_symlink("/etc/hostname", host / "sys/link");
  testing::write_file(host / "outside/secret", "x");
  auto l = layout();
  const std::string sys = std::filesystem::canonical(host / "sys").string();
  const std::string outside = std::filesystem::canonical(host / "outside").string();
  l.system_paths.push_back(sys);
  l.hidden_paths = {sys + "/secret-dir", sys + "/secret-file", sys + "/link", outside + "/secret"};
  const auto steps = steps_for(l);
  const std::string empty = (mount_points_.path() / "empty").string();
  const std::string empty_dir = (mount_points_.path() / "empty-dir").string();
  const auto read_only = index_of(steps, "making " + sys + " read-only");
  ASSERT_GE(read_only, 0);
  const auto dir = index_of(steps, "bind-mounting " + empty_dir + " on " + sys + "/secret-dir");
  const auto file = index_of(steps, "bind-mounting " + empty + " on " + sys + "/secret-file");
  EXPECT_GT(dir, read_only);
  EXPECT_GT(file, read_only);
  for (const auto& step : steps) {
    EXPECT_EQ(step.target.find(sys + "/link"), std::string::npos) << step.stage;
    EXPECT_EQ(step.target.find(outside), std::string::npos) << step.stage;
  }
}

// /proc's host-changing files stay, read-only: each bound on itself inside
// the new /proc, then made read-only; a kernel without one skips it.
TEST_F(PlanTest, ProcsHostFilesAreReadOnlyBindsOnThemselves) {
  const auto steps = steps_for(layout());
  const std::string root = (mount_points_.path() / "root").string();
  const auto proc = index_of(steps, "mounting proc on /proc");
  ASSERT_GE(proc, 0);
  for (const std::string path : {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"}) {
    const auto bind = index_of(steps, "bind-mounting " + path + " on itself");
    ASSERT_GT(bind, proc) << path;
    const auto& bound = steps[static_cast<std::size_t>(bind)];
    EXPECT_EQ(bound.source, root + path) << "the sandbox's proc, not the host's";
    EXPECT_EQ(bound.target, root + path);
    EXPECT_TRUE(bound.optional);
    const auto& read_only = steps[static_cast<std::size_t>(bind + 1)];
    EXPECT_EQ(read_only.op, MountOp::ReadOnly) << path;
    EXPECT_EQ(read_only.target, root + path);
    EXPECT_TRUE(read_only.optional);
  }
  const std::string empty = (mount_points_.path() / "empty").string();
  const std::string empty_dir = (mount_points_.path() / "empty-dir").string();
  for (const std::string& mask :
       {"bind-mounting " + empty + " on /proc/kcore", "bind-mounting " + empty + " on /proc/keys",
        "bind-mounting " + empty_dir + " on /proc/acpi"}) {
    EXPECT_GT(index_of(steps, mask), proc) << mask << ": over the new /proc";
  }
}

// Without an idmapped tree the overlay's lower layer is the workspace
// itself; its upper and work directories are the run's, never the
// workspace's; nothing setuid or device-like comes through.
TEST_F(PlanTest, TheWorkspaceStepsWithoutAnIdmappedTree) {
  auto l = layout();
  const auto steps = build_workspace_mount_steps(l);
  ASSERT_EQ(steps.size(), 2u) << "no .agent, no hidden paths";
  EXPECT_EQ(steps[0].op, MountOp::MakeDir);
  EXPECT_EQ(steps[0].target, (mount_points_.path() / "root").string() + "/workspace");
  const auto& overlay = steps[1];
  EXPECT_EQ(overlay.op, MountOp::Overlay);
  EXPECT_EQ(overlay.target, (mount_points_.path() / "root").string() + "/workspace");
  EXPECT_EQ(overlay.flags, static_cast<unsigned long>(MS_NOSUID | MS_NODEV));
  EXPECT_EQ(overlay.data, "lowerdir=" + (mount_points_.path() / "agent-whiteout").string() + ":" +
                              workspace_.path().string() + ",upperdir=" + run_.path().string() +
                              "/upper,workdir=" + run_.path().string() +
                              "/work,userxattr,index=off,xino=off,volatile");
  for (const auto& step : steps)
    EXPECT_NE(step.op, MountOp::AttachFd);
}

// With one the tree is attached first at the shared lower mount point (a
// host path: the old root is still there), and the overlay reads it there;
// .agent is hidden by the whiteout layer above it.
TEST_F(PlanTest, TheWorkspaceStepsWithAnIdmappedTree) {
  std::filesystem::create_directories(workspace_ / ".agent");
  auto l = layout();
  l.idmapped_workspace_fd = 9;
  const auto steps = build_workspace_mount_steps(l);
  ASSERT_EQ(steps.size(), 3u);
  const std::string lower = (mount_points_.path() / "lower").string();
  EXPECT_EQ(steps[0].op, MountOp::AttachFd);
  EXPECT_EQ(steps[0].fd, 9);
  EXPECT_EQ(steps[0].target, lower);
  EXPECT_FALSE(steps[0].optional);
  EXPECT_EQ(steps[2].op, MountOp::Overlay);
  EXPECT_EQ(steps[2].data, "lowerdir=" + (mount_points_.path() / "agent-whiteout").string() + ":" +
                               lower + ",upperdir=" + run_.path().string() +
                               "/upper,workdir=" + run_.path().string() +
                               "/work,userxattr,index=off,xino=off,volatile");
}

// Hidden workspace paths (an audit log kept in the workspace) are masked
// over the overlay, by their type; a symlink (which the sandbox could point
// anywhere), a missing path and an empty one are skipped.
TEST_F(PlanTest, HiddenWorkspacePathsAreMaskedOverTheOverlay) {
  std::filesystem::create_directories(workspace_ / "logs/dir");
  testing::write_file(workspace_ / "logs/audit.jsonl", "x");
  std::filesystem::create_symlink("/etc/hostname", workspace_ / "link");
  auto l = layout();
  l.hide_agent_dir = false;
  l.hidden_workspace_paths = {"logs/audit.jsonl", "logs/dir", "link", "missing", ""};
  const auto steps = build_workspace_mount_steps(l);
  const std::string empty = (mount_points_.path() / "empty").string();
  const std::string empty_dir = (mount_points_.path() / "empty-dir").string();
  const auto overlay = index_of(steps, "mounting overlay on /workspace");
  const auto file = index_of(steps, "bind-mounting " + empty + " on /workspace/logs/audit.jsonl");
  const auto dir = index_of(steps, "bind-mounting " + empty_dir + " on /workspace/logs/dir");
  ASSERT_GE(overlay, 0);
  EXPECT_GT(file, overlay);
  EXPECT_GT(dir, overlay);
  EXPECT_EQ(steps.size(), 4u) << "the link, the missing path and \"\" are skipped";
  for (const auto index : {file, dir}) {
    ASSERT_GE(index, 0);
    const auto& mask = steps[static_cast<std::size_t>(index)];
    EXPECT_EQ(mask.op, MountOp::Bind);
    EXPECT_FALSE(mask.recursive);
    EXPECT_EQ(mask.target.rfind((mount_points_.path() / "root").string() + "/workspace/", 0), 0u);
  }
}

TEST(ExecCandidates, SearchPathInOrderUnlessTheProgramHasASlash) {
  EXPECT_EQ(exec_candidates("make", "/usr/local/bin:relative::/usr/bin"),
            (std::vector<std::string>{"/usr/local/bin/make", "/usr/bin/make"}));
  EXPECT_EQ(exec_candidates("./run.sh", "/usr/bin"), (std::vector<std::string>{"./run.sh"}));
  EXPECT_EQ(exec_candidates("/bin/sh", "/usr/bin"), (std::vector<std::string>{"/bin/sh"}));
}

TEST(SubordinateIds, TheFirstLargeEnoughRangeOfTheUser) {
  TempDir dir;
  testing::write_file(dir / "subuid",
                      "alice:100000:65536\nroot:200000:1000\nbroken\nroot:300000:65536\n");
  EXPECT_EQ(linux_api::subordinate_id_base((dir / "subuid").string(), "root", 65536),
            std::optional<std::uint32_t>(300000));
  EXPECT_EQ(linux_api::subordinate_id_base((dir / "subuid").string(), "bob", 1), std::nullopt);
}

// A FIFO or device in place of /etc/subuid or /etc/passwd lists nobody: it
// must neither block the launch nor be read forever (/dev/zero).
TEST(SubordinateIds, ANonRegularFileListsNobody) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  ::alarm(20);  // a regression that blocks ends the test binary
  EXPECT_EQ(linux_api::subordinate_id_base((dir / "fifo").string(), "root", 1), std::nullopt);
  EXPECT_EQ(linux_api::user_name_in_passwd((dir / "fifo").string(), 0), std::nullopt);
  EXPECT_EQ(linux_api::subordinate_id_base("/dev/zero", "root", 1), std::nullopt);
  EXPECT_EQ(linux_api::user_name_in_passwd("/dev/zero", 0), std::nullopt);
  ::alarm(0);
}

TEST(SubordinateIds, UserNamesComeFromThePasswdFile) {
  TempDir dir;
  testing::write_file(
      dir / "passwd",
      "root:x:0:0:root:/root:/bin/bash\nbroken\nbob:x:10001:10001::/home/bob:/bin/sh\n"
      "alice:x:1000:1000::/home/alice:/bin/sh\n");
  const std::string passwd = (dir / "passwd").string();
  EXPECT_EQ(linux_api::user_name_in_passwd(passwd, 1000), std::optional<std::string>("alice"));
  EXPECT_EQ(linux_api::user_name_in_passwd(passwd, 0), std::optional<std::string>("root"));
  // 100 is a prefix of 1000 and of 10001: only a whole field matches.
  EXPECT_EQ(linux_api::user_name_in_passwd(passwd, 100), std::nullopt);
  EXPECT_EQ(linux_api::user_name_in_passwd((dir / "missing").string(), 0), std::nullopt);
}

TEST(ChildMessages, DescribeTheStageAndTheErrno) {
  ChildMessage message;
  message.kind = ChildMessageKind::Error;
  message.error_number = EINVAL;
  std::snprintf(message.stage, sizeof message.stage, "mounting overlay on /workspace");
  EXPECT_EQ(describe_child_error(message),
            "mounting overlay on /workspace: EINVAL (Invalid argument)");
}

}  // namespace
}  // namespace pulsebox::runtime
