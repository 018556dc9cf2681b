// Real overlayfs mounts: a workload changes the merged view, the upper
// directory is imported as a transaction and committed, and the committed
// workspace must equal the merged view byte for byte.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <fstream>

#include "helpers/namespaces.h"
#include "helpers/test_support.h"
#include "pulsebox/error.h"
#include "pulsebox/workspace.h"

namespace pulsebox {
namespace {

using testing::listing;
using testing::NamespaceKind;
using testing::TempDir;
using testing::write_file;

struct OverlayMode {
  NamespaceKind kind;
  bool userxattr;
  const char* opaque_xattr;
  const char* name;
};

class OverlayTest : public ::testing::TestWithParam<OverlayMode> {
 protected:
  void SetUp() override {
    if (GetParam().kind == NamespaceKind::kMountOnly) {
      PULSEBOX_SKIP_UNLESS_ROOT("trusted.overlay.* xattrs need root in the initial user namespace");
    }
    for (const char* dir : {"ws", "upper", "work", "merged"}) {
      std::filesystem::create_directories(base_ / dir);
    }
    write_file(ws() / "src/main.c", "int main(void) { return 0; }\n");
    write_file(ws() / "notes.txt", "to be deleted\n");
    write_file(ws() / "docs/guide.md", "# guide\n");
    write_file(ws() / "docs/img/logo.txt", "logo\n");
    write_file(ws() / "run.sh", "#!/bin/sh\necho hi\n");
    write_file(ws() / "build/obj/x.o", std::string("\x7f"
                                                   "ELF\x00",
                                                   5));
    write_file(ws() / "build/log", "old log\n");
    write_file(ws() / "lib/old/z.txt", "z\n");
    write_file(ws() / "lib/keep.txt", "keep\n");
  }

  std::filesystem::path ws() const { return base_ / "ws"; }

  // Mounts the overlay in fresh namespaces, runs `workload` on the merged
  // view, and returns the merged view's listing (written by the child).
  std::map<std::string, std::string> run_workload(
      const std::function<void(const std::filesystem::path&)>& workload) {
    const auto listing_file = base_ / "merged.listing";
    const auto outcome = testing::run_in_namespaces(GetParam().kind, [&]() -> int {
      const int err = testing::mount_overlay(ws(), base_ / "upper", base_ / "work",
                                             base_ / "merged", GetParam().userxattr);
      if (err != 0) return 10;
      workload(base_ / "merged");
      std::ofstream out(listing_file);
      for (const auto& [path, description] : listing(base_ / "merged")) {
        out << path << "\t" << description << "\n";
      }
      return out.good() ? 0 : 11;
    });
    if (outcome.setup_failed) {
      ADD_FAILURE() << "namespaces: " << outcome.setup_error;
      return {};
    }
    EXPECT_EQ(outcome.exit_code, 0) << "overlay mount or workload failed in the child";
    std::map<std::string, std::string> merged;
    std::ifstream in(listing_file);
    std::string line;
    while (std::getline(in, line)) {
      const auto tab = line.find('\t');
      merged[line.substr(0, tab)] = line.substr(tab + 1);
    }
    return merged;
  }

  TempDir base_;
};

TEST_P(OverlayTest, CommittedWorkspaceEqualsMergedView) {
  const auto merged = run_workload([](const std::filesystem::path& m) {
    write_file(m / "bin/data.bin", std::string("\x00\x01\xfe\xff binary\x00", 12));
    write_file(m / "src/main.c", "int main(void) { return 42; }\n");
    std::filesystem::remove(m / "notes.txt");         // whiteout
    std::filesystem::remove_all(m / "docs");          // directory replaced...
    write_file(m / "docs", "docs are now a file\n");  // ...by a file
    std::filesystem::create_symlink("src/main.c", m / "latest");
    ::chmod((m / "run.sh").c_str(), 0755);           // mode only
    std::filesystem::remove_all(m / "build");        // opaque directory:
    std::filesystem::create_directory(m / "build");  // lower entries hidden
    write_file(m / "build/new.txt", "fresh build\n");
    std::filesystem::remove(m / "lib/old/z.txt");  // whiteout in a lower dir
  });
  ASSERT_FALSE(merged.empty());

  // The overlay really produced whiteouts and an opaque directory.
  struct stat whiteout {};
  ASSERT_EQ(::lstat((base_ / "upper/notes.txt").c_str(), &whiteout), 0);
  EXPECT_TRUE(S_ISCHR(whiteout.st_mode));
  char value[4] = {};
  EXPECT_EQ(
      ::lgetxattr((base_ / "upper/build").c_str(), GetParam().opaque_xattr, value, sizeof value), 1)
      << GetParam().opaque_xattr << " not set on the opaque directory";

  Workspace workspace(ws());
  const auto tx = workspace.import_overlay(base_ / "upper", ws(), "overlay test");
  ASSERT_TRUE(tx.has_value());
  std::map<std::string, ChangeKind> kinds;
  for (const auto& change : workspace.describe(*tx).changes)
    kinds[change.path] = change.kind;
  EXPECT_EQ(kinds.at("run.sh"), ChangeKind::Mode);
  EXPECT_EQ(kinds.at("notes.txt"), ChangeKind::Deleted);
  EXPECT_EQ(kinds.at("latest"), ChangeKind::Symlink);
  EXPECT_EQ(kinds.at("bin/data.bin"), ChangeKind::Added);
  EXPECT_EQ(kinds.at("build/obj"), ChangeKind::Deleted);
  EXPECT_EQ(kinds.count("lib/keep.txt"), 0u);  // untouched lower files are not changes

  const std::string diff = workspace.diff(*tx);
  EXPECT_NE(diff.find("Binary files /dev/null and b/bin/data.bin differ"), std::string::npos)
      << diff;
  EXPECT_NE(diff.find("-int main(void) { return 0; }\n+int main(void) { return 42; }\n"),
            std::string::npos)
      << diff;

  workspace.commit(*tx);
  EXPECT_EQ(listing(ws()), merged);
}

TEST_P(OverlayTest, UnchangedRunGivesNoTransaction) {
  const auto merged = run_workload([](const std::filesystem::path& m) {
    // Reading and rewriting identical content copies up without changing anything.
    const std::string same = testing::read_file(m / "lib/keep.txt");
    write_file(m / "lib/keep.txt", same);
  });
  ASSERT_FALSE(merged.empty());
  Workspace workspace(ws());
  EXPECT_FALSE(workspace.import_overlay(base_ / "upper", ws()).has_value());
  EXPECT_TRUE(workspace.list_transactions().empty());
}

TEST_P(OverlayTest, ASpecialFileIsRefusedAndTheRestStaged) {
  const auto merged = run_workload([](const std::filesystem::path& m) {
    ::mkfifo((m / "pipe").c_str(), 0644);
    write_file(m / "kept.txt", "kept\n");
  });
  Workspace workspace(ws());
  const ImportResult result = workspace.import_overlay(base_ / "upper", ws(), ImportOptions{});
  ASSERT_EQ(result.refused.size(), 1u);
  EXPECT_EQ(result.refused[0].path, "pipe");
  EXPECT_EQ(result.refused[0].reason, "a FIFO cannot be committed to the workspace");
  ASSERT_TRUE(result.transaction.has_value());
  const auto info = workspace.describe(*result.transaction);
  ASSERT_EQ(info.changes.size(), 1u);
  EXPECT_EQ(info.changes[0].path, "kept.txt");
  ASSERT_EQ(info.refused.size(), 1u);
}

TEST_P(OverlayTest, SetuidBitsAreDropped) {
  const auto merged = run_workload([](const std::filesystem::path& m) {
    write_file(m / "tool", "#!/bin/sh\n");
    ::chmod((m / "tool").c_str(), 04755);
  });
  struct stat st {};
  ASSERT_EQ(::lstat((base_ / "upper/tool").c_str(), &st), 0);
  ASSERT_NE(st.st_mode & S_ISUID, 0u) << "the workload could not set the setuid bit";
  Workspace workspace(ws());
  const ImportResult result = workspace.import_overlay(base_ / "upper", ws(), ImportOptions{});
  ASSERT_TRUE(result.transaction.has_value());
  ASSERT_EQ(result.notes.size(), 1u);
  EXPECT_NE(result.notes[0].note.find("setuid/setgid bits dropped"), std::string::npos);
  workspace.commit(*result.transaction);
  ASSERT_EQ(::lstat((ws() / "tool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
}

// The reader refused the whole change set ("it resolves outside the allowed
// root") when a symlink to outside the workspace became a directory.
TEST_P(OverlayTest, SymlinkToOutsideReplacedByADirectory) {
  const auto outside = base_ / "outside";
  std::filesystem::create_directories(outside);
  write_file(outside / "keep.txt", "outside\n");
  std::filesystem::create_symlink(outside, ws() / "d");
  const auto merged = run_workload([](const std::filesystem::path& m) {
    std::filesystem::remove(m / "d");
    write_file(m / "d/keep.txt", "inside\n");
  });
  Workspace workspace(ws());
  const auto tx = workspace.import_overlay(base_ / "upper", ws(), ImportOptions{}).transaction;
  ASSERT_TRUE(tx.has_value());
  workspace.commit(*tx);
  EXPECT_FALSE(std::filesystem::is_symlink(ws() / "d"));
  EXPECT_EQ(testing::read_file(ws() / "d/keep.txt"), "inside\n");
  EXPECT_EQ(testing::read_file(outside / "keep.txt"), "outside\n");
  EXPECT_EQ(listing(ws()), merged);
}

INSTANTIATE_TEST_SUITE_P(Modes, OverlayTest,
                         ::testing::Values(OverlayMode{NamespaceKind::kUserAndMount, true,
                                                       "user.overlay.opaque", "UserNamespace"},
                                           OverlayMode{NamespaceKind::kMountOnly, false,
                                                       "trusted.overlay.opaque",
                                                       "RootTrustedXattrs"}),
                         [](const ::testing::TestParamInfo<OverlayMode>& param_info) {
                           return std::string(param_info.param.name);
                         });

}  // namespace
}  // namespace pulsebox
