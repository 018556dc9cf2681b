// Sessions without a sandbox: hand-made upper directories (what overlayfs
// leaves: files, whiteouts, opaque directories) added run after run, merged
// into one layer, reviewed and committed; and a commit killed at every step,
// then finished or undone by the next operation that opens the session.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

#include "helpers/test_support.h"
#include "pulsebox/error.h"
#include "pulsebox/secrets.h"
#include "pulsebox/session.h"
#include "workspace/layers.h"
#include "workspace/session_store.h"
#include "workspace/transactions.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

void whiteout(const fs::path& path) {
  fs::create_directories(path.parent_path());
  ASSERT_EQ(::mknod(path.c_str(), S_IFCHR | 0000, makedev(0, 0)), 0)
      << path << ": " << std::strerror(errno);
}

void opaque_dir(const fs::path& path) {
  fs::create_directories(path);
  ASSERT_EQ(::setxattr(path.c_str(), "user.overlay.opaque", "y", 1, 0), 0) << std::strerror(errno);
}

// Every path of a directory tree with what it is: "f:content", "d", "l:target".
std::map<std::string, std::string> listing(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string rel = it->path().lexically_relative(root).string();
    if (rel == ".agent" || rel.starts_with(".agent/")) {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_symlink()) {
      out[rel] = "l:" + fs::read_symlink(it->path()).string();
    } else if (it->is_directory()) {
      out[rel] = "d";
    } else {
      out[rel] = "f:" + read_file(it->path());
    }
  }
  return out;
}

class SessionStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_file(ws_ / "keep.txt", "keep\n");
    write_file(ws_ / "gone.txt", "gone\n");
    write_file(ws_ / "dir/old.txt", "old\n");
    write_file(ws_ / "dir/sub/deep.txt", "deep\n");
    fs::create_directories(state_ / "kept");
    fs::permissions(state_ / "kept", fs::perms(0700));
    fs::create_directories(state_ / "runs");
  }

  fs::path new_upper() {
    const fs::path upper = state_ / "runs" / std::to_string(uppers_++);
    fs::create_directories(upper);
    return upper;
  }

  // Adds `upper` as a run of session "s", checked with `values` if given.
  void add_run(Workspace& ws, const fs::path& upper, const SecretScrubber* values = nullptr) {
    auto session = workspace::OpenSession::open(ws, "s", kept(), true);
    ASSERT_TRUE(session) << session.error().to_string();
    auto added = session->add_run(upper, values);
    ASSERT_TRUE(added) << added.error().to_string();
  }

  fs::path kept() const { return state_ / "kept"; }

  // Runs `operation` on the workspace at `ws` in a child killed at its
  // step `at`; whether it was killed there.
  static bool killed_at(const fs::path& ws, std::string_view at,
                        const std::function<void(Workspace&)>& operation) {
    const pid_t child = ::fork();
    if (child == 0) {
      workspace::commit_failpoint = [at](std::string_view step) {
        if (step == at) ::raise(SIGKILL);
      };
      Workspace again(ws);
      operation(again);
      ::_exit(0);
    }
    int status = 0;
    return child > 0 && ::waitpid(child, &status, 0) == child && WIFSIGNALED(status);
  }

  // Commits session `name` in a child killed at the commit's step `at`.
  bool commit_killed_at(const fs::path& ws, const std::string& name, std::string_view at) {
    return killed_at(ws, at, [&](Workspace& again) { (void)commit_session(again, name, kept()); });
  }

  // Discards session "s" of ws_ in a child killed at the removal's step `at`.
  bool discard_killed_at(std::string_view at) {
    return killed_at(ws_.path(), at,
                     [&](Workspace& again) { discard_session(again, "s", kept()); });
  }

  // A run that made new.txt (0640; as root, of the sandbox's mapped user,
  // as a root run's layer holds it, in a directory of that user's) and
  // changed keep.txt: the session's layer, and new.txt there as `new_file`.
  fs::path add_new_and_changed_file(Workspace& ws, struct stat& new_file) {
    const fs::path upper = new_upper();
    write_file(upper / "new.txt", "new\n");
    write_file(upper / "keep.txt", "changed\n");
    ::chmod((upper / "new.txt").c_str(), 0640);
    if (::geteuid() == 0) {
      EXPECT_EQ(::chown((upper / "new.txt").c_str(), 4242, 4243), 0);
      EXPECT_EQ(::chown(upper.c_str(), 4242, 4243), 0);
    }
    add_run(ws, upper);
    const fs::path layer = describe_session(ws, "s", kept()).layers.front();
    EXPECT_EQ(::stat((layer / "new.txt").c_str(), &new_file), 0);
    return layer;
  }

  TempDir ws_;
  TempDir state_;
  int uppers_ = 0;
};

TEST_F(SessionStoreTest, LaterRunsBuildOnEarlierOnesAndTheSessionCommitsItsNetChanges) {
  Workspace ws(ws_.path());
  // Run 1: a new file, a deletion, a modification, a new tree.
  fs::path upper = new_upper();
  write_file(upper / "new.txt", "new\n");
  whiteout(upper / "gone.txt");
  write_file(upper / "keep.txt", "changed\n");
  write_file(upper / "tree/a/b.txt", "b\n");
  add_run(ws, upper);
  // Run 2: the directory replaced (rm -r dir; mkdir dir), a file of run 1
  // deleted, run 1's file changed again.
  upper = new_upper();
  opaque_dir(upper / "dir");
  write_file(upper / "dir/fresh.txt", "fresh\n");
  whiteout(upper / "tree/a/b.txt");
  write_file(upper / "new.txt", "newer\n");
  add_run(ws, upper);
  // Run 3: a rename of run 2's file (a whiteout and a new name), a symlink.
  upper = new_upper();
  whiteout(upper / "dir/fresh.txt");
  write_file(upper / "dir/renamed.txt", "fresh\n");
  fs::create_directories(upper);
  fs::create_symlink("../keep.txt", upper / "link");
  add_run(ws, upper);

  const SessionInfo info = describe_session(ws, "s", kept());
  EXPECT_EQ(info.runs, 3u);
  ASSERT_EQ(info.layers.size(), 1u) << "the layers were not merged";
  EXPECT_TRUE(workspace::exists_in_view(info.layers, ws_.path(), "dir/renamed.txt"));
  EXPECT_FALSE(workspace::exists_in_view(info.layers, ws_.path(), "dir/old.txt"));
  EXPECT_FALSE(workspace::exists_in_view(info.layers, ws_.path(), "dir/sub/deep.txt"));
  EXPECT_FALSE(workspace::exists_in_view(info.layers, ws_.path(), "gone.txt"));
  EXPECT_TRUE(workspace::exists_in_view(info.layers, ws_.path(), "keep.txt"));
  // The workspace is untouched until the commit.
  EXPECT_EQ(read_file(ws_ / "keep.txt"), "keep\n");

  const SessionCommitResult committed = commit_session(ws, "s", kept());
  EXPECT_TRUE(committed.refused.empty());
  const std::map<std::string, std::string> expected = {{"keep.txt", "f:changed\n"},
                                                       {"new.txt", "f:newer\n"},
                                                       {"dir", "d"},
                                                       {"dir/renamed.txt", "f:fresh\n"},
                                                       {"tree", "d"},
                                                       {"tree/a", "d"},
                                                       {"link", "l:../keep.txt"}};
  EXPECT_EQ(listing(ws_.path()), expected);
  EXPECT_TRUE(list_sessions(ws, kept()).empty());
  EXPECT_TRUE(ws.list_transactions().empty());
  EXPECT_TRUE(fs::is_empty(state_ / "kept")) << "the session's layers were left behind";
}

// A run that replaced a directory (`rm -r dir; mkdir dir`, an opaque
// directory in its layer) deleted what the directory held below it: its
// list of changes said only what the new one holds ("nothing changed" for
// an empty one), while the review showed the deletions. Beneath it, a
// directory made again hides what it held too; a directory where a file
// was is a change of that path.
TEST_F(SessionStoreTest, ARunThatReplacedADirectoryListsWhatItDeletedBeneathIt) {
  Workspace ws(ws_.path());
  fs::path upper = new_upper();
  write_file(upper / "dir/extra.txt", "extra\n");  // a run before: dir holds one more
  whiteout(upper / "dir/old.txt");                 // and one less
  add_run(ws, upper);
  upper = new_upper();
  opaque_dir(upper / "dir");
  write_file(upper / "dir/fresh.txt", "fresh\n");
  // rm -r dir; mkdir -p dir/sub: only dir is opaque, and dir/sub hides
  // what it held below all the same.
  fs::create_directories(upper / "dir/sub");
  // rm gone.txt; mkdir gone.txt: a directory where a file was.
  fs::create_directories(upper / "gone.txt");
  auto session = workspace::OpenSession::open(ws, "s", kept(), true);
  ASSERT_TRUE(session) << session.error().to_string();
  auto changes = session->add_run(upper);
  ASSERT_TRUE(changes) << changes.error().to_string();
  std::map<std::string, ChangeKind> listed;
  for (const Change& change : *changes)
    listed[change.path] = change.kind;
  const std::map<std::string, ChangeKind> expected = {{"dir/fresh.txt", ChangeKind::Added},
                                                      {"dir/extra.txt", ChangeKind::Deleted},
                                                      {"dir/sub/deep.txt", ChangeKind::Deleted},
                                                      {"gone.txt", ChangeKind::Modified}};
  EXPECT_EQ(listed, expected);
}

// A run with a registered value checks what it deletes in the workspace,
// so that the review (without the value) can show it; past its budget it
// stops, marks where (a subtree), and the review shows nothing there.
TEST_F(SessionStoreTest, ARunsCheckOfWhatItDeletedStopsAtItsBudgetAndTheReviewShowsNoneOfIt) {
  const SecretScrubber scrubber({"s3cr3t-abcdef-42"});
  const auto review_of = [&](std::uint64_t budget) {
    TempDir ws_dir;
    write_file(ws_dir / "dir/old.txt", "old\n");
    write_file(ws_dir / "dir/two.txt", "two\n");
    Workspace ws(ws_dir.path());
    const auto saved = workspace::base_check_budget;
    workspace::base_check_budget.paths = budget;
    fs::path upper = new_upper();
    whiteout(upper / "dir");  // rm -r dir
    bool incomplete = false;
    {
      auto session = workspace::OpenSession::open(ws, "s", kept(), true);
      EXPECT_TRUE(session) << session.error().to_string();
      if (session) {
        EXPECT_TRUE(session->add_run(upper, &scrubber));
        incomplete = read_file(ws_dir / ".agent/sessions/s.json").find("\"subtree\": true") !=
                     std::string::npos;
      }
    }
    workspace::base_check_budget = saved;
    upper = new_upper();
    write_file(upper / "dir/new.txt", "new\n");  // mkdir dir: opaque once merged
    add_run(ws, upper);
    const ImportResult review = session_transaction(ws, "s", kept());
    EXPECT_TRUE(review.transaction.has_value());
    const std::string diff = review.transaction ? ws.diff(*review.transaction) : "";
    discard_session(ws, "s", kept());
    return std::make_pair(incomplete, diff);
  };
  const auto [within, checked] = review_of(10);
  EXPECT_FALSE(within);
  EXPECT_NE(checked.find("-old\n"), std::string::npos) << checked;
  const auto [over, withheld] = review_of(1);
  EXPECT_TRUE(over);
  EXPECT_EQ(withheld.find("-old\n"), std::string::npos) << withheld;
  EXPECT_EQ(withheld.find("-two\n"), std::string::npos) << withheld;
  EXPECT_NE(withheld.find("[content not shown"), std::string::npos) << withheld;
  EXPECT_NE(withheld.find("+new\n"), std::string::npos) << withheld;
}

// Marks a later run cannot clear: an earlier run's "not checked" stands
// whatever values the later run has (they need not be the earlier run's),
// and a run killed between its two saves leaves the marks as they were
// (the first save took only the layer's number). pulsebox's own .agent/
// is never looked into.
TEST_F(SessionStoreTest, MarksSurviveLaterRunsWithOtherValuesAndARunKilledPartWay) {
  const std::string alpha = "ALPHA-secret-111";
  const SecretScrubber first({alpha});
  const SecretScrubber other({"BETA-other-222"});
  write_file(ws_ / "dir/a.txt", "a\n");
  write_file(ws_ / "z.txt", "token=" + alpha + "\n");
  Workspace ws(ws_.path());
  const auto saved = workspace::base_check_budget;
  workspace::base_check_budget.paths = 1;
  fs::path upper = new_upper();
  whiteout(upper / "dir");
  write_file(upper / "z.txt", "edited\n");
  write_file(upper / "p.txt", "token=" + alpha + "\n");
  write_file(upper / ".agent/x", alpha + "\n");
  add_run(ws, upper, &first);  // the budget is spent on dir/: z.txt is marked unchecked
  workspace::base_check_budget = saved;
  const std::string record = read_file(ws_ / ".agent/sessions/s.json");
  EXPECT_EQ(record.find(".agent/x"), std::string::npos) << record;
  upper = new_upper();
  write_file(upper / "z.txt", "clean\n");
  add_run(ws, upper, &other);
  upper = new_upper();
  whiteout(upper / "p.txt");
  EXPECT_TRUE(killed_at(ws_.path(), "session layer number saved", [&](Workspace& again) {
    auto session = workspace::OpenSession::open(again, "s", kept(), true);
    if (session) (void)session->add_run(upper, &first);
  }));
  const ImportResult review = session_transaction(ws, "s", kept());
  ASSERT_TRUE(review.transaction.has_value());
  const std::string diff = ws.diff(*review.transaction);
  EXPECT_EQ(diff.find(alpha), std::string::npos) << diff;
  EXPECT_NE(diff.find("+token=[REDACTED"), std::string::npos) << diff;    // p.txt still marked
  EXPECT_NE(diff.find("[content not shown"), std::string::npos) << diff;  // z.txt's before
}

// The marks of paths holding a value live in the session's record, which
// has a size limit: a run deleting more such files than it can hold made a
// record no operation could read again (the session stuck for good). Past
// the room for marks, bases are not recorded (none unknown is shown), and
// a run writing the value into more files than that is refused (the
// facade holds its changes).
TEST_F(SessionStoreTest, MarksOfSecretsNeverGrowTheRecordPastWhatCanBeReadAgain) {
  const std::string value = "s3cr3t-abcdef-42";
  const SecretScrubber scrubber({value});
  const auto long_name = [](int i) { return std::string(200, 'n') + std::to_string(i); };
  for (int i = 0; i < 1500; ++i)
    write_file(ws_ / "held" / long_name(i), "token=" + value + "\n");
  Workspace ws(ws_.path());
  const auto open = [&] { return workspace::OpenSession::open(ws, "s", kept(), true); };
  fs::path upper = new_upper();
  whiteout(upper / "held");  // rm -r held
  {
    auto session = open();
    ASSERT_TRUE(session) << session.error().to_string();
    ASSERT_TRUE(session->add_run(upper, &scrubber));
    EXPECT_TRUE(session->bases_incomplete());
  }
  upper = new_upper();
  for (int i = 0; i < 1500; ++i)
    write_file(upper / "copies" / long_name(i), value + "\n");
  {
    auto session = open();
    ASSERT_TRUE(session) << session.error().to_string();
    auto refused = session->add_run(upper, &scrubber);
    ASSERT_FALSE(refused);
    EXPECT_EQ(refused.error().kind(), core::ErrorKind::kResource);
    EXPECT_NE(refused.error().message().find("more places than the session's record"),
              std::string::npos)
        << refused.error().to_string();
  }
  EXPECT_LT(fs::file_size(ws_ / ".agent/sessions/s.json"), 1u << 20);
  auto again = open();
  ASSERT_TRUE(again) << again.error().to_string();
  EXPECT_TRUE(again->bases_incomplete());
  EXPECT_EQ(again->info().layers.size(), 1u);
}

// A session's run checked only its files' contents for the registered
// values. A name holding one (a file's, a directory's and so everything
// beneath it, a deletion's) or a symlink's target holding one was neither
// flagged by the review nor refused by the commit, as a plain run's import
// does for each: `session commit` wrote them into the workspace without
// --allow-secrets. The marks outlive a later run that knows no value.
TEST_F(SessionStoreTest, NamesAndLinkTargetsHoldingAValueAreFlaggedAndRefusedAsARunsAre) {
  const std::string value = "s3cr3t-abcdef-42";
  const SecretScrubber scrubber({value});
  write_file(ws_ / ("old-" + value), "old\n");
  write_file(ws_ / "h" / ("hidden-" + value), "hidden\n");
  Workspace ws(ws_.path());
  fs::path upper = new_upper();
  write_file(upper / ("f-" + value), "plain\n");
  write_file(upper / ("d-" + value) / "g", "inner\n");
  fs::create_symlink("clean-too", upper / ("d-" + value) / "cl");
  fs::create_symlink("/tmp/" + value, upper / "link");
  opaque_dir(upper / "h");  // rm -r h; mkdir h: deletes h/hidden-<value>
  fs::create_symlink("clean-target", upper / "clean-link");
  write_file(upper / "clean.txt", "clean\n");
  whiteout(upper / ("old-" + value));
  {
    auto session = workspace::OpenSession::open(ws, "s", kept(), true);
    ASSERT_TRUE(session) << session.error().to_string();
    auto added = session->add_run(upper, &scrubber);
    ASSERT_TRUE(added) << added.error().to_string();
    EXPECT_FALSE(session->info().secret_paths.empty());
  }
  upper = new_upper();
  write_file(upper / ("d-" + value) / "later", "later\n");
  add_run(ws, upper);  // no value known: nothing checked
  const auto before = listing(ws_.path());

  const ImportResult review = session_transaction(ws, "s", kept());
  ASSERT_TRUE(review.transaction.has_value());
  EXPECT_TRUE(review.contains_secrets);
  std::map<std::string, bool> flagged;
  for (const auto& change : ws.describe(*review.transaction).changes)
    flagged[change.path] = change.contains_secret;
  const std::map<std::string, bool> expected = {{"f-" + value, true},
                                                {"d-" + value, true},
                                                {"d-" + value + "/g", true},
                                                {"d-" + value + "/cl", true},
                                                {"d-" + value + "/later", true},
                                                {"link", true},
                                                {"clean-link", false},
                                                {"clean.txt", false},
                                                {"old-" + value, true},
                                                {"h/hidden-" + value, true}};
  EXPECT_EQ(flagged, expected);
  const std::string diff = ws.diff(*review.transaction);
  EXPECT_EQ(diff.find("/tmp/" + value), std::string::npos) << diff;  // the target, redacted
  EXPECT_NE(diff.find("+plain\n"), std::string::npos) << diff;       // no value in it: shown
  EXPECT_NE(diff.find("+inner\n"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+clean-too"), std::string::npos) << diff;
  ws.discard(*review.transaction);

  EXPECT_THROW((void)commit_session(ws, "s", kept()), SandboxSecurityError);
  EXPECT_EQ(listing(ws_.path()), before) << "a refused commit applied something";
  ASSERT_FALSE(describe_session(ws, "s", kept()).layers.empty());
  const SessionCommitResult committed =
      commit_session(ws, "s", kept(), CommitOptions{.allow_secrets = true});
  EXPECT_EQ(committed.committed.size(), expected.size());
  EXPECT_EQ(fs::read_symlink(ws_ / "link").string(), "/tmp/" + value);
  EXPECT_EQ(read_file(ws_ / ("d-" + value) / "later"), "later\n");
  EXPECT_FALSE(fs::exists(ws_ / ("old-" + value)));
}

// A session whose only marks are names: its commit is refused too (the
// commit reads the marks itself), and a run's result says it holds one.
// A mark of one kind is never shown for another: a later run that knew no
// value and replaced a marked file with a symlink (or a marked symlink with
// a file) is shown as what the commit would write, not as the old copy.
TEST_F(SessionStoreTest, ASessionOfMarkedNamesAloneIsRefusedAndNoMarkIsShownForAnotherKind) {
  const std::string value = "s3cr3t-abcdef-42";
  const SecretScrubber scrubber({value});
  Workspace ws(ws_.path());
  fs::path upper = new_upper();
  fs::create_directories(upper / ("d-" + value));
  write_file(upper / "f", "token=" + value + "\n");
  fs::create_symlink("/x/" + value, upper / "l");
  {
    auto session = workspace::OpenSession::open(ws, "s", kept(), true);
    ASSERT_TRUE(session) << session.error().to_string();
    ASSERT_TRUE(session->add_run(upper, &scrubber));
    EXPECT_EQ(session->info().secret_paths, (std::vector<std::string>{"d-" + value, "f", "l"}));
  }
  upper = new_upper();
  fs::create_symlink("/etc/hostname", upper / "f");
  write_file(upper / "l", "hello\n");
  add_run(ws, upper);  // no value known
  const ImportResult review = session_transaction(ws, "s", kept());
  ASSERT_TRUE(review.transaction.has_value());
  std::map<std::string, bool> flagged;
  for (const auto& change : ws.describe(*review.transaction).changes)
    flagged[change.path] = change.contains_secret;
  EXPECT_EQ(flagged,
            (std::map<std::string, bool>{{"d-" + value, true}, {"f", false}, {"l", false}}));
  const std::string diff = ws.diff(*review.transaction);
  EXPECT_NE(diff.find("+/etc/hostname"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+hello\n"), std::string::npos) << diff;
  EXPECT_EQ(diff.find("REDACTED"), std::string::npos) << diff;
  ws.discard(*review.transaction);
  EXPECT_THROW((void)commit_session(ws, "s", kept()), SandboxSecurityError);
  EXPECT_FALSE(fs::exists(ws_ / ("d-" + value)));
}

// `rm -rf d` in one run and `mkdir d` in the next: the second run's `d` is
// a plain directory (the kernel does not mark it opaque over a lower
// layer's whiteout), and only the merge marks it so. The check saw nothing
// hidden, while the review stages the deletion of each workspace name
// beneath it: one named with the value went through unflagged (found by
// reading the code; reproduced by hand with two runs).
TEST_F(SessionStoreTest, ADirectoryMadeOverAnEarlierRunsDeletionHidesWhatItsNamesHeld) {
  const std::string value = "s3cr3t-abcdef-42";
  const SecretScrubber scrubber({value});
  write_file(ws_ / "d" / ("v-" + value), "v\n");
  write_file(ws_ / "d" / "plain.txt", "plain\n");
  Workspace ws(ws_.path());
  fs::path upper = new_upper();
  whiteout(upper / "d");
  add_run(ws, upper, &scrubber);
  upper = new_upper();
  write_file(upper / "d" / "new.txt", "new\n");  // not opaque, as the kernel leaves it
  add_run(ws, upper, &scrubber);
  const ImportResult review = session_transaction(ws, "s", kept());
  ASSERT_TRUE(review.transaction.has_value());
  std::map<std::string, bool> flagged;
  for (const auto& change : ws.describe(*review.transaction).changes)
    flagged[change.path] = change.contains_secret;
  EXPECT_EQ(flagged, (std::map<std::string, bool>{
                         {"d/v-" + value, true}, {"d/plain.txt", false}, {"d/new.txt", false}}));
  ws.discard(*review.transaction);
  EXPECT_THROW((void)commit_session(ws, "s", kept()), SandboxSecurityError);
}

// While it holds a mark, the session keeps a keyed digest of each value its
// runs registered, so that a later run without one of them can be told
// apart before it runs (the facade then refuses it unless --allow-weaker
// secrets): it could `mv` what a mark names to where no mark is. A file too
// large to check is marked for this too (an attack: one over
// kMaxScannedBytes left no mark, and a later run without the value cut it
// out). A case variant is another value (its base64 forms differ: an
// attack moved a base64 copy past a run that registered the value in
// another case). With no mark held, no value is needed (a rotating token).
TEST_F(SessionStoreTest, ASessionKnowsWhichValuesItsMarksNeedWithoutHoldingThem) {
  const std::string value = "S3cr3t-abcdef-42";
  const SecretScrubber values({value});
  Workspace ws(ws_.path());
  const auto needs = [&](const SecretScrubber& run_values) {
    auto session = workspace::OpenSession::open(ws, "s", kept(), true);
    EXPECT_TRUE(session) << session.error().to_string();
    return session->needs_values_beyond(run_values);
  };
  fs::path upper = new_upper();
  write_file(upper / "clean.txt", "clean\n");
  add_run(ws, upper, &values);
  EXPECT_FALSE(needs(SecretScrubber{}));  // nothing marked

  upper = new_upper();
  write_file(upper / "big", "");
  fs::resize_file(upper / "big", workspace::kMaxScannedBytes + 1);  // sparse
  add_run(ws, upper, &values);
  EXPECT_TRUE(needs(SecretScrubber{}));
  EXPECT_FALSE(needs(values));
  upper = new_upper();
  whiteout(upper / "big");
  add_run(ws, upper, &values);
  EXPECT_FALSE(needs(SecretScrubber{}));  // the mark went with the file

  upper = new_upper();
  write_file(upper / "c", value + "\n");
  const SecretScrubber two({value, "other-value-99"});
  add_run(ws, upper, &two);
  const std::string record = read_file(ws_ / ".agent/sessions/s.json");
  EXPECT_EQ(record.find("other-value-99"), std::string::npos) << record;
  EXPECT_EQ(record.find(value), std::string::npos) << record;
  EXPECT_FALSE(needs(two));
  EXPECT_FALSE(needs(SecretScrubber({"other-value-99", value, "a-third"})));
  EXPECT_TRUE(needs(SecretScrubber({"s3cr3t-abcdef-42", "other-value-99"})));
  EXPECT_TRUE(needs(values));
  EXPECT_TRUE(needs(SecretScrubber{}));
  upper = new_upper();
  write_file(upper / "c" / "x", "hi\n");  // rm c; mkdir c: c's mark goes with the file
  add_run(ws, upper, &two);
  EXPECT_FALSE(needs(SecretScrubber{}));
  EXPECT_TRUE(describe_session(ws, "s", kept()).secret_paths.empty());
  // A name's mark goes with the name (a review found it kept for good, and
  // the values with it).
  upper = new_upper();
  fs::create_directories(upper / ("n-" + value));
  add_run(ws, upper, &values);
  EXPECT_TRUE(needs(SecretScrubber{}));
  upper = new_upper();
  whiteout(upper / ("n-" + value));  // rmdir: the workspace never had it
  add_run(ws, upper, &values);
  EXPECT_FALSE(needs(SecretScrubber{}));
  EXPECT_TRUE(describe_session(ws, "s", kept()).secret_paths.empty());
  // A layer whose root is opaque replaces the whole view: every mark goes.
  upper = new_upper();
  fs::create_directories(upper / ("n-" + value));
  add_run(ws, upper, &values);
  upper = new_upper();
  opaque_dir(upper);
  write_file(upper / "only.txt", "only\n");
  add_run(ws, upper, &values);
  EXPECT_FALSE(needs(SecretScrubber{}));
}

// An ordinary user's session whose runs did `chmod 000` on their own
// directory and file (and a later one opened it, wrote, and shut it): the
// value check, the merge of the next run, the review and the commit read
// them with the owner's permission added for the read, and the layer keeps
// the modes the runs left (a later run sees them as they were). Before,
// the first run with a value was refused, and without one the review and
// the commit failed ("open directory locked: Permission denied"): the
// session could only be thrown away.
TEST_F(SessionStoreTest, AnOrdinaryUsersSessionThatLockedItsOwnFilesIsReviewedAndCommitted) {
  const std::string value = "s3cr3t-abcdef-42";
  const SecretScrubber scrubber({value});
  const fs::path first = new_upper();
  write_file(first / "locked/inner/f.txt", "inside\n");
  write_file(first / "sealed.txt", "token=" + value + "\n");
  const fs::path second = new_upper();
  write_file(second / "locked/g.txt", "later\n");  // copied up: the directory's mode too
  // New in the second run: moved down into the layer whole, which a
  // directory its owner may not write refused (its ".." is rewritten).
  write_file(second / "fresh/h.txt", "fresh\n");
  write_file(second / "listed/l.txt", "listed\n");  // read, but not searched
  // A file of the workspace's replaced by a shut directory: marked opaque
  // as it moves down (a whiteout of it in the layer below).
  whiteout(first / "keep.txt");
  write_file(second / "keep.txt/k.txt", "k\n");
  for (const fs::path& path : {first / "locked/inner", first / "locked", first / "sealed.txt",
                               second / "locked", second / "fresh", second / "keep.txt"}) {
    ASSERT_EQ(::chmod(path.c_str(), 0), 0) << path;
  }
  ASSERT_EQ(::chmod((second / "listed").c_str(), 0600), 0);
  for (const fs::path& base : {ws_.path(), state_.path()})
    ASSERT_TRUE(testing::hand_to_ordinary_user(base)) << base;
  const auto mode_of = [](const fs::path& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 07777u;
  };
  const int status = testing::run_as_ordinary_user([&] {
    Workspace ws(ws_.path());
    for (const fs::path& upper : {first, second}) {
      auto session = workspace::OpenSession::open(ws, "s", kept(), true);
      if (!session) return 10;
      if (auto added = session->add_run(upper, &scrubber); !added) {
        std::fprintf(stderr, "%s\n", added.error().to_string().c_str());
        return 11;
      }
    }
    const fs::path layer = describe_session(ws, "s", kept()).layers.front();
    const ImportResult review = session_transaction(ws, "s", kept());
    if (!review.transaction) return 12;
    std::map<std::string, unsigned> modes;
    bool sealed_marked = false;
    for (const auto& change : ws.describe(*review.transaction).changes) {
      modes[change.path] = change.mode;
      if (change.path == "sealed.txt") sealed_marked = change.contains_secret;
    }
    const std::map<std::string, unsigned> expected = {
        {"locked", 0},          {"locked/inner", 0},     {"locked/inner/f.txt", 0644},
        {"locked/g.txt", 0644}, {"sealed.txt", 0},       {"fresh", 0},
        {"fresh/h.txt", 0644},  {"listed", 0600},        {"listed/l.txt", 0644},
        {"keep.txt", 0},        {"keep.txt/k.txt", 0644}};
    if (modes != expected || !sealed_marked) return 13;
    const std::string diff = ws.diff(*review.transaction);
    if (diff.find(value) != std::string::npos || diff.find("+inside\n") == std::string::npos ||
        diff.find("+fresh\n") == std::string::npos || diff.find("+listed\n") == std::string::npos)
      return 14;
    ws.discard(*review.transaction);
    if (mode_of(layer / "locked") != 0 || mode_of(layer / "sealed.txt") != 0 ||
        mode_of(layer / "fresh") != 0 || mode_of(layer / "listed") != 0600)
      return 15;
    (void)commit_session(ws, "s", kept(), CommitOptions{.allow_secrets = true});
    return 0;
  });
  ASSERT_EQ(status, 0) << "10: not opened; 11: a run refused; 12: no review; 13: other paths, "
                          "modes or marks; 14: the diff; 15: the layer's modes; 101: an error";
  EXPECT_EQ(mode_of(ws_ / "locked"), 0u);
  EXPECT_EQ(mode_of(ws_ / "locked/inner"), 0u);
  EXPECT_EQ(mode_of(ws_ / "sealed.txt"), 0u);
  EXPECT_EQ(read_file(ws_ / "sealed.txt"), "token=" + value + "\n");
  EXPECT_EQ(read_file(ws_ / "locked/inner/f.txt"), "inside\n");
  EXPECT_EQ(read_file(ws_ / "locked/g.txt"), "later\n");
  EXPECT_EQ(mode_of(ws_ / "fresh"), 0u);
  EXPECT_EQ(mode_of(ws_ / "listed"), 0600u);
  EXPECT_EQ(read_file(ws_ / "fresh/h.txt"), "fresh\n");
  EXPECT_EQ(mode_of(ws_ / "keep.txt"), 0u);
  EXPECT_EQ(read_file(ws_ / "keep.txt/k.txt"), "k\n");
  EXPECT_TRUE(fs::is_empty(kept())) << "the session's layers were left behind";
  for (const char* dir : {"locked", "locked/inner", "fresh", "listed", "keep.txt"})
    fs::permissions(ws_ / dir, fs::perms::owner_all);
}

// The workspace's own modes are never changed, not even for an instant: a
// run's change beneath a workspace directory shut to its owner had the
// description of the run's changes open it as its owner, which moved its
// ctime (a pending transaction replacing its parent then failed to commit,
// "directory contents changed") and, killed at that instant, left it open.
TEST_F(SessionStoreTest, AWorkspaceDirectoryShutToItsOwnerIsNeverOpenedUp) {
  write_file(ws_ / "priv/p.txt", "p\n");
  const fs::path upper = new_upper();
  write_file(upper / "priv/x.txt", "x\n");
  for (const fs::path& dir : {ws_ / "priv", upper / "priv"})
    ASSERT_EQ(::chmod(dir.c_str(), 0), 0);
  for (const fs::path& base : {ws_.path(), state_.path()})
    ASSERT_TRUE(testing::hand_to_ordinary_user(base)) << base;
  struct stat before {};
  ASSERT_EQ(::lstat((ws_ / "priv").c_str(), &before), 0);
  ::usleep(20000);  // a ctime moved now differs from the one above
  const int status = testing::run_as_ordinary_user([&] {
    Workspace ws(ws_.path());
    auto session = workspace::OpenSession::open(ws, "s", kept(), true);
    if (!session) return 10;
    return session->add_run(upper) ? 0 : 11;
  });
  ASSERT_EQ(status, 0) << "10: not opened; 11: the run refused; 101: an error";
  struct stat after {};
  ASSERT_EQ(::lstat((ws_ / "priv").c_str(), &after), 0);
  EXPECT_EQ(after.st_mode & 07777, 0u);
  EXPECT_EQ(after.st_ctim.tv_sec, before.st_ctim.tv_sec);
  EXPECT_EQ(after.st_ctim.tv_nsec, before.st_ctim.tv_nsec)
      << "the workspace's directory was opened up";
  fs::permissions(ws_ / "priv", fs::perms::owner_all);
}

TEST_F(SessionStoreTest, ACommitConflictingWithAHostChangeSinceTheSessionBeganKeepsTheSession) {
  Workspace ws(ws_.path());
  fs::path upper = new_upper();
  write_file(upper / "keep.txt", "session\n");
  add_run(ws, upper);
  write_file(ws_ / "keep.txt", "host edit\n");  // after the session began
  EXPECT_THROW(commit_session(ws, "s", kept()), SandboxError);
  EXPECT_EQ(read_file(ws_ / "keep.txt"), "host edit\n");
  ASSERT_EQ(list_sessions(ws, kept()).size(), 1u);
  EXPECT_FALSE(describe_session(ws, "s", kept()).committing);
  EXPECT_TRUE(ws.list_transactions().empty()) << "the refused transaction was left pending";
}

// A review's transaction holds the layer's own files (hard links: no copy
// of a large session's bytes at every review), and nothing done with that
// transaction changes the layer: not its discard, not its commit, which
// gives the workspace copies of its own.
TEST_F(SessionStoreTest, AReviewSharesTheLayersFilesAndNothingDoneWithItChangesThem) {
  Workspace ws(ws_.path());
  struct stat before {};
  const fs::path layer = add_new_and_changed_file(ws, before);
  const bool as_root = ::geteuid() == 0;
  const auto layer_file_is_as_before = [&](const std::string& when) {
    struct stat now {};
    ASSERT_EQ(::stat((layer / "new.txt").c_str(), &now), 0) << when;
    EXPECT_EQ(now.st_ino, before.st_ino) << when;
    EXPECT_EQ(now.st_nlink, 1u) << when;
    EXPECT_EQ(now.st_uid, before.st_uid) << when;
    EXPECT_EQ(now.st_gid, before.st_gid) << when;
    EXPECT_EQ(now.st_mode, before.st_mode) << when;
    EXPECT_EQ(now.st_mtim.tv_sec, before.st_mtim.tv_sec) << when;
    EXPECT_EQ(now.st_mtim.tv_nsec, before.st_mtim.tv_nsec) << when;
    EXPECT_EQ(read_file(layer / "new.txt"), "new\n") << when;
  };

  ImportResult review = session_transaction(ws, "s", kept());
  ASSERT_TRUE(review.transaction);
  struct stat shared {};
  ASSERT_EQ(::stat((layer / "new.txt").c_str(), &shared), 0);
  EXPECT_EQ(shared.st_nlink, 2u) << "the review copied the layer's file instead of sharing it";
  const std::string diff = ws.diff(*review.transaction);
  EXPECT_NE(diff.find("+new"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+changed"), std::string::npos) << diff;
  ws.discard(*review.transaction);
  layer_file_is_as_before("after the review's discard");

  // The review's transaction is a pending transaction like any other, and
  // may be committed, in part or whole: the workspace's file is then its own
  // inode, and the layer's file is linked from nowhere else.
  review = session_transaction(ws, "s", kept());
  ASSERT_TRUE(review.transaction);
  ws.commit(*review.transaction, {.paths = {"new.txt"}});
  layer_file_is_as_before("after a commit of the review's new.txt");
  ws.commit(*review.transaction);
  layer_file_is_as_before("after the review's commit");
  struct stat committed {};
  ASSERT_EQ(::stat((ws_ / "new.txt").c_str(), &committed), 0);
  EXPECT_NE(committed.st_ino, before.st_ino) << "the workspace's file is the layer's inode";
  EXPECT_EQ(committed.st_nlink, 1u);
  EXPECT_EQ(committed.st_mode & 07777, 0640u);
  EXPECT_EQ(committed.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  if (as_root) {
    EXPECT_EQ(committed.st_uid, 0u) << "a new file takes its directory's owner";
  }
  EXPECT_EQ(read_file(ws_ / "new.txt"), "new\n");
  EXPECT_EQ(read_file(ws_ / "keep.txt"), "changed\n");
  // The session still holds its changes, and commits (nothing is left to
  // change: the workspace already has them).
  EXPECT_EQ(list_sessions(ws, kept()).size(), 1u);
  commit_session(ws, "s", kept());
  EXPECT_TRUE(list_sessions(ws, kept()).empty());
  EXPECT_TRUE(ws.list_transactions().empty());
}

// A commit of the whole session ends its layer: the layer's files become
// the workspace's (renamed in, their owner the directory's, as a run's own
// files are) instead of being copied and then deleted with the layer.
TEST_F(SessionStoreTest, ACommitOfTheWholeSessionMovesTheLayersFilesIn) {
  Workspace ws(ws_.path());
  struct stat before {};
  const fs::path layer = add_new_and_changed_file(ws, before);

  const SessionCommitResult committed = commit_session(ws, "s", kept());
  EXPECT_TRUE(committed.refused.empty());
  struct stat now {};
  ASSERT_EQ(::stat((ws_ / "new.txt").c_str(), &now), 0);
  EXPECT_EQ(now.st_ino, before.st_ino) << "the layer's file was copied";
  EXPECT_EQ(now.st_nlink, 1u) << "the layer kept a link to the workspace's file";
  EXPECT_EQ(now.st_mode & 07777, 0640u);
  EXPECT_EQ(now.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(now.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  EXPECT_EQ(now.st_uid, ::geteuid()) << "a new file takes its directory's owner";
  EXPECT_EQ(now.st_gid, ::getegid());
  EXPECT_EQ(read_file(ws_ / "new.txt"), "new\n");
  EXPECT_EQ(read_file(ws_ / "keep.txt"), "changed\n");
  EXPECT_TRUE(list_sessions(ws, kept()).empty());
  EXPECT_TRUE(ws.list_transactions().empty());
  EXPECT_TRUE(fs::is_empty(kept())) << "the session's layer was left behind";
}

// A session that outlives its commit (a change was refused and stays in
// it) keeps its layer's files apart from the workspace's: a later run or
// an edit of either side must not reach the other.
TEST_F(SessionStoreTest, ASessionThatOutlivesItsCommitSharesNoFileWithTheWorkspace) {
  Workspace ws(ws_.path());
  fs::path upper = new_upper();
  write_file(upper / "new.txt", "new\n");
  ASSERT_EQ(::mkfifo((upper / "pipe").c_str(), 0600), 0) << std::strerror(errno);
  add_run(ws, upper);
  const fs::path layer = describe_session(ws, "s", kept()).layers.front();
  struct stat before {};
  ASSERT_EQ(::stat((layer / "new.txt").c_str(), &before), 0);

  const SessionCommitResult committed = commit_session(ws, "s", kept());
  ASSERT_EQ(committed.refused.size(), 1u);
  EXPECT_EQ(committed.refused[0].path, "pipe");
  ASSERT_EQ(list_sessions(ws, kept()).size(), 1u) << "the session with a refused change ended";
  struct stat in_workspace {};
  ASSERT_EQ(::stat((ws_ / "new.txt").c_str(), &in_workspace), 0);
  EXPECT_NE(in_workspace.st_ino, before.st_ino) << "the workspace's file is the layer's inode";
  EXPECT_EQ(in_workspace.st_nlink, 1u);
  struct stat in_layer {};
  ASSERT_EQ(::stat((layer / "new.txt").c_str(), &in_layer), 0);
  EXPECT_EQ(in_layer.st_ino, before.st_ino);
  EXPECT_EQ(in_layer.st_nlink, 1u);
  EXPECT_EQ(in_layer.st_uid, before.st_uid);
  EXPECT_EQ(in_layer.st_mode, before.st_mode);
  EXPECT_EQ(read_file(ws_ / "new.txt"), "new\n");
  EXPECT_TRUE(ws.list_transactions().empty());
}

TEST_F(SessionStoreTest, AKilledCommitIsFinishedOrUndoneByTheNextOperation) {
  int saw_old = 0;
  int saw_new = 0;
  for (int crash_after = 1; crash_after < 40; ++crash_after) {
    TempDir ws_dir;
    write_file(ws_dir / "a.txt", "a\n");
    write_file(ws_dir / "b.txt", "b\n");
    Workspace ws(ws_dir.path());
    fs::path upper = new_upper();
    write_file(upper / "a.txt", "A\n");
    whiteout(upper / "b.txt");
    write_file(upper / "c/d.txt", "d\n");
    // As root, a file of the sandbox's mapped user, which the commit moves in.
    if (::geteuid() == 0) {
      ASSERT_EQ(::chown((upper / "c/d.txt").c_str(), 4242, 4243), 0);
    }
    {
      auto session = workspace::OpenSession::open(ws, "s", kept(), true);
      ASSERT_TRUE(session);
      ASSERT_TRUE(session->add_run(upper));
    }
    const fs::path layer = describe_session(ws, "s", kept()).layers.front();
    struct stat layer_file {};
    ASSERT_EQ(::stat((layer / "c/d.txt").c_str(), &layer_file), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      int step = 0;
      workspace::commit_failpoint = [&](std::string_view) {
        if (++step == crash_after) ::raise(SIGKILL);
      };
      Workspace again(ws_dir.path());
      commit_session(again, "s", kept());
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    if (WIFEXITED(status)) {
      EXPECT_EQ(WEXITSTATUS(status), 0);
      break;  // past the last step
    }
    // Any operation that opens the session finishes or undoes the commit.
    Workspace later(ws_dir.path());
    const auto sessions = list_sessions(later, kept());
    if (!sessions.empty()) (void)describe_session(later, "s", kept());
    const auto state = listing(ws_dir.path());
    if (state.at("a.txt") == "f:a\n") {
      ++saw_old;
      ASSERT_EQ(list_sessions(later, kept()).size(), 1u) << "crash at " << crash_after;
      EXPECT_FALSE(describe_session(later, "s", kept()).committing);
      EXPECT_TRUE(later.list_transactions().empty()) << "crash at " << crash_after;
      // The session's layer is whole and its own: the file the commit would
      // have moved in is still there, with no other link.
      struct stat now {};
      ASSERT_EQ(::stat((layer / "c/d.txt").c_str(), &now), 0) << "crash at " << crash_after;
      EXPECT_EQ(now.st_ino, layer_file.st_ino) << "crash at " << crash_after;
      EXPECT_EQ(now.st_nlink, 1u) << "crash at " << crash_after;
      EXPECT_EQ(now.st_uid, layer_file.st_uid) << "crash at " << crash_after;
      EXPECT_EQ(now.st_mode, layer_file.st_mode) << "crash at " << crash_after;
      commit_session(later, "s", kept());  // and it commits cleanly afterwards
    } else {
      ++saw_new;
      EXPECT_TRUE(list_sessions(later, kept()).empty()) << "crash at " << crash_after;
    }
    const std::map<std::string, std::string> expected = {
        {"a.txt", "f:A\n"}, {"c", "d"}, {"c/d.txt", "f:d\n"}};
    EXPECT_EQ(listing(ws_dir.path()), expected) << "crash at " << crash_after;
    EXPECT_TRUE(later.list_transactions().empty());
    struct stat committed {};
    ASSERT_EQ(::stat((ws_dir / "c/d.txt").c_str(), &committed), 0);
    EXPECT_EQ(committed.st_nlink, 1u) << "crash at " << crash_after;
    EXPECT_EQ(committed.st_uid, ::geteuid()) << "crash at " << crash_after;
  }
  EXPECT_GE(saw_old, 1);
  EXPECT_GE(saw_new, 1);
}

// A commit that fails past its commit point (here: an error right after
// READY) can only be finished: the session keeps naming it, and ends when
// the next operation has finished it, never living on beside it.
TEST_F(SessionStoreTest, ACommitThatFailsAfterItsCommitPointEndsTheSessionOnceFinished) {
  Workspace ws(ws_.path());
  fs::path upper = new_upper();
  write_file(upper / "new.txt", "new\n");
  add_run(ws, upper);
  workspace::commit_failpoint = [](std::string_view step) {
    if (step == "ready marker") throw SandboxError("failed on purpose after READY");
  };
  EXPECT_THROW(commit_session(ws, "s", kept()), SandboxError);
  workspace::commit_failpoint = nullptr;
  EXPECT_FALSE(fs::exists(ws_ / "new.txt"));
  Workspace later(ws_.path());
  EXPECT_TRUE(list_sessions(later, kept()).empty()) << "the session outlived its decided commit";
  EXPECT_EQ(read_file(ws_ / "new.txt"), "new\n");
  struct stat committed {};
  ASSERT_EQ(::stat((ws_ / "new.txt").c_str(), &committed), 0);
  EXPECT_EQ(committed.st_nlink, 1u);
  EXPECT_TRUE(later.list_transactions().empty());
  EXPECT_TRUE(fs::is_empty(kept()));
}

// The same with a change refused (the session lives on after its commit):
// whether the commit fails or is killed right after its commit point, the
// next opening finishes it and keeps the session with what it holds.
TEST_F(SessionStoreTest, ASessionWithARefusedChangeOutlivesACommitStoppedAfterItsCommitPoint) {
  for (const bool killed : {false, true}) {
    SCOPED_TRACE(killed ? "killed" : "failed");
    TempDir ws_dir;
    Workspace ws(ws_dir.path());
    fs::path upper = new_upper();
    write_file(upper / "new.txt", "new\n");
    ASSERT_EQ(::mkfifo((upper / "pipe").c_str(), 0600), 0) << std::strerror(errno);
    {
      auto session = workspace::OpenSession::open(ws, "s", kept(), true);
      ASSERT_TRUE(session);
      ASSERT_TRUE(session->add_run(upper));
    }
    const fs::path layer = describe_session(ws, "s", kept()).layers.front();
    if (killed) {
      ASSERT_TRUE(commit_killed_at(ws_dir.path(), "s", "ready marker"));
    } else {
      workspace::commit_failpoint = [](std::string_view step) {
        if (step == "ready marker") throw SandboxError("failed on purpose after READY");
      };
      EXPECT_THROW(commit_session(ws, "s", kept()), SandboxError);
      workspace::commit_failpoint = nullptr;
    }
    Workspace later(ws_dir.path());
    const auto sessions = list_sessions(later, kept());
    ASSERT_EQ(sessions.size(), 1u) << "the session and its refused change were removed";
    EXPECT_FALSE(sessions[0].committing);
    struct stat refused {};
    EXPECT_EQ(::lstat((layer / "pipe").c_str(), &refused), 0) << "the refused change was lost";
    EXPECT_EQ(read_file(ws_dir / "new.txt"), "new\n");
    struct stat in_workspace {};
    struct stat in_layer {};
    ASSERT_EQ(::stat((ws_dir / "new.txt").c_str(), &in_workspace), 0);
    ASSERT_EQ(::stat((layer / "new.txt").c_str(), &in_layer), 0);
    EXPECT_NE(in_workspace.st_ino, in_layer.st_ino);
    EXPECT_EQ(in_layer.st_nlink, 1u);
    EXPECT_TRUE(later.list_transactions().empty());
    discard_session(later, "s", kept());
  }
}

// A whole session's commit that fails after its transaction is gone (its
// clean-up done) still ends the session: its layer's files are the
// workspace's by then.
TEST_F(SessionStoreTest, ACommitThatFailsOnceFinishedStillEndsTheSession) {
  Workspace ws(ws_.path());
  struct stat before {};
  (void)add_new_and_changed_file(ws, before);
  workspace::commit_failpoint = [](std::string_view step) {
    if (step == "cleaned up") throw SandboxError("failed on purpose after the clean-up");
  };
  EXPECT_THROW(commit_session(ws, "s", kept()), SandboxError);
  workspace::commit_failpoint = nullptr;
  Workspace later(ws_.path());
  EXPECT_TRUE(list_sessions(later, kept()).empty()) << "the session outlived its finished commit";
  struct stat now {};
  ASSERT_EQ(::stat((ws_ / "new.txt").c_str(), &now), 0);
  EXPECT_EQ(now.st_nlink, 1u);
  EXPECT_TRUE(fs::is_empty(kept()));
  EXPECT_TRUE(fs::is_empty(ws_ / ".agent/transactions")) << "the commit's marker was left";
}

// The only transaction directory of a workspace.
fs::path only_transaction(const fs::path& ws) {
  std::vector<fs::path> found;
  for (const auto& item : fs::directory_iterator(ws / ".agent/transactions"))
    found.push_back(item.path());
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? fs::path() : found.front();
}

// A commit whose transaction is gone without the marker a finished commit
// leaves (discarded by another process, removed by hand, or its clean-up
// failed) may or may not have been applied: the session stays, with its
// changes, and its layer shares no file with the workspace.
TEST_F(SessionStoreTest, ASessionWhoseCommitHasAnUnknownOutcomeStaysAndSharesNothing) {
  Workspace ws(ws_.path());
  struct stat before {};
  const fs::path layer = add_new_and_changed_file(ws, before);
  // Applied, then its directory gone without a trace.
  workspace::commit_failpoint = [this](std::string_view step) {
    if (step != "cleaned up") return;
    fs::remove_all(only_transaction(ws_.path()));
    throw SandboxError("failed on purpose, the transaction gone");
  };
  EXPECT_THROW(commit_session(ws, "s", kept()), SandboxError);
  workspace::commit_failpoint = nullptr;
  Workspace later(ws_.path());
  const auto sessions = list_sessions(later, kept());
  ASSERT_EQ(sessions.size(), 1u) << "a session ended without evidence of its commit";
  EXPECT_FALSE(sessions[0].committing);
  struct stat in_workspace {};
  struct stat in_layer {};
  ASSERT_EQ(::stat((ws_ / "new.txt").c_str(), &in_workspace), 0);
  ASSERT_EQ(::stat((layer / "new.txt").c_str(), &in_layer), 0);
  EXPECT_NE(in_workspace.st_ino, in_layer.st_ino) << "the kept layer shares the workspace's file";
  EXPECT_EQ(in_workspace.st_nlink, 1u);
  EXPECT_EQ(in_layer.st_nlink, 1u);
  EXPECT_EQ(in_layer.st_uid, before.st_uid);
  EXPECT_EQ(in_layer.st_mode, before.st_mode);
  EXPECT_EQ(read_file(layer / "new.txt"), "new\n");
  // Committed again, it changes nothing the workspace has, and ends.
  (void)commit_session(later, "s", kept());
  EXPECT_TRUE(list_sessions(later, kept()).empty());
  EXPECT_EQ(read_file(ws_ / "new.txt"), "new\n");
  EXPECT_EQ(read_file(ws_ / "keep.txt"), "changed\n");

  // Killed after its commit point, its directory then removed by hand (as
  // pulsebox advises for a commit point it cannot verify): nothing of it
  // was applied, and the session keeps every change.
  TempDir other;
  write_file(other / "keep.txt", "keep\n");
  Workspace second(other.path());
  fs::path upper = new_upper();
  write_file(upper / "fresh.txt", "fresh\n");
  {
    auto session = workspace::OpenSession::open(second, "t", kept(), true);
    ASSERT_TRUE(session);
    ASSERT_TRUE(session->add_run(upper));
  }
  const fs::path second_layer = describe_session(second, "t", kept()).layers.front();
  ASSERT_TRUE(commit_killed_at(other.path(), "t", "ready marker"));
  fs::remove_all(only_transaction(other.path()));
  Workspace after(other.path());
  const auto kept_sessions = list_sessions(after, kept());
  ASSERT_EQ(kept_sessions.size(), 1u) << "the session's changes were lost";
  EXPECT_FALSE(fs::exists(other / "fresh.txt"));
  EXPECT_EQ(read_file(second_layer / "fresh.txt"), "fresh\n");
  (void)commit_session(after, "t", kept());
  EXPECT_EQ(read_file(other / "fresh.txt"), "fresh\n");
}

// A link made to a layer's file between the import and the commit (by
// whoever could reach the kept directory) keeps it from moving in: the
// workspace gets a copy, and the other name does not reach it.
TEST_F(SessionStoreTest, ALayerFileWithAnotherLinkIsCopiedNotMovedIn) {
  Workspace ws(ws_.path());
  struct stat before {};
  const fs::path layer = add_new_and_changed_file(ws, before);
  const fs::path elsewhere = state_ / "elsewhere";
  workspace::commit_failpoint = [&](std::string_view step) {
    if (step == "snapshots checked") {
      ASSERT_EQ(::link((layer / "new.txt").c_str(), elsewhere.c_str()), 0) << std::strerror(errno);
    }
  };
  (void)commit_session(ws, "s", kept());
  workspace::commit_failpoint = nullptr;
  struct stat now {};
  ASSERT_EQ(::stat((ws_ / "new.txt").c_str(), &now), 0);
  EXPECT_NE(now.st_ino, before.st_ino) << "a file with another link was moved in";
  EXPECT_EQ(now.st_nlink, 1u);
  EXPECT_EQ(read_file(ws_ / "new.txt"), "new\n");
  struct stat other {};
  ASSERT_EQ(::stat(elsewhere.c_str(), &other), 0);
  EXPECT_EQ(other.st_ino, before.st_ino);
  EXPECT_EQ(other.st_nlink, 1u);
  EXPECT_TRUE(list_sessions(ws, kept()).empty());
}

// The transaction of a commit killed before its commit point is listed by
// `pulsebox changes` like any other, but discarding it by hand is refused:
// the session would then read it as committed and end, its changes lost.
TEST_F(SessionStoreTest, AnInterruptedSessionCommitCannotBeDiscardedByHand) {
  struct stat before {};
  Workspace ws(ws_.path());
  const fs::path layer = add_new_and_changed_file(ws, before);
  ASSERT_TRUE(commit_killed_at(ws_.path(), "s", "snapshots checked"));
  Workspace later(ws_.path());
  const auto pending = later.list_transactions();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_THROW(later.discard(pending[0].id), SandboxRecoveryError);
  EXPECT_THROW(later.discard(pending[0].id, {"new.txt"}), SandboxRecoveryError);
  const auto sessions = list_sessions(later, kept());
  ASSERT_EQ(sessions.size(), 1u) << "the session ended with its commit undone";
  EXPECT_FALSE(sessions[0].committing);
  EXPECT_TRUE(later.list_transactions().empty());
  EXPECT_EQ(read_file(layer / "new.txt"), "new\n");
  EXPECT_EQ(read_file(ws_ / "keep.txt"), "keep\n");
  (void)commit_session(later, "s", kept());
  EXPECT_EQ(read_file(ws_ / "new.txt"), "new\n");
  EXPECT_EQ(read_file(ws_ / "keep.txt"), "changed\n");
}

TEST_F(SessionStoreTest, ARecordPlantedInTheWorkspaceCannotNameAnotherDirectory) {
  Workspace ws(ws_.path());
  TempDir victim;
  write_file(victim / "precious", "x");
  // A repository can ship .agent/ and a kept/ of its own (owned by the user
  // who cloned it, mode 0755), its layer a symlink to any directory.
  fs::create_directories(ws_ / "kept/session-evil");
  fs::create_directory_symlink(victim.path(), ws_ / "kept/session-evil/0");
  const std::string planted_storage = (ws_ / "kept/session-evil").string();
  for (const std::string& storage : {victim.path().string(), planted_storage}) {
    SCOPED_TRACE(storage);
    fs::create_directories(ws_ / ".agent/sessions");
    write_file(ws_ / ".agent/sessions/evil.json",
               R"({"name":"evil","created":"c","runs":1,"base_stamp_ns":0,"next_layer":1,)"
               R"("storage":")" +
                   storage + R"(","layers":["0"]})");
    EXPECT_THROW(discard_session(ws, "evil", kept()), SandboxSecurityError);
    EXPECT_FALSE(workspace::OpenSession::open(ws, "evil", kept(), true).ok());
    EXPECT_TRUE(fs::exists(victim / "precious"));
    const auto listed = list_sessions(ws, kept());
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_FALSE(listed[0].damaged.empty()) << "a planted record was listed as a session";
  }
  // A layer of a real session that is a symlink is refused as well.
  fs::create_directories(kept() / "session-real");
  fs::create_directory_symlink(victim.path(), kept() / "session-real/0");
  write_file(ws_ / ".agent/sessions/real.json",
             R"({"name":"real","created":"c","runs":1,"base_stamp_ns":0,"next_layer":1,)"
             R"("storage":")" +
                 (kept() / "session-real").string() + R"(","layers":["0"]})");
  EXPECT_THROW(describe_session(ws, "real", kept()), SandboxSecurityError);
  // A held record naming a directory outside the kept one.
  fs::create_directories(ws_ / ".agent/held");
  write_file(ws_ / ".agent/held/held-x.json",
             R"({"id":"held-x","created":"c","origin":"o","reason":"r","refused":[],)"
             R"("location":")" +
                 victim.path().string() + R"("})");
  EXPECT_THROW(discard_held(ws, "held-x", kept()), SandboxError);
  EXPECT_TRUE(fs::exists(victim / "precious"));
}

// A record copied or planted in another workspace (a shared or committed
// .agent/, a `cp -a` of the workspace) names a live session's storage:
// the recovery that listing or opening it makes (a removal to finish, a
// commit whose COMMITTED marker is planted beside it, a commit gone
// without one) must not remove or change that storage, and its discard
// by name removes the record alone. Only the session's own storage says
// it is theirs.
TEST_F(SessionStoreTest, ARecordInAnotherWorkspaceCannotRemoveOrChangeASessionsLayers) {
  struct stat new_file {};
  Workspace ws(ws_.path());
  const fs::path layer = add_new_and_changed_file(ws, new_file);
  // A second link: what the unsharing after an unknown commit replaces.
  ASSERT_EQ(::link((layer / "new.txt").c_str(), (layer / "linked.txt").c_str()), 0);
  const std::string storage = layer.parent_path().string();
  TempDir other;
  Workspace planted(other.path());
  fs::create_directories(other / ".agent/sessions");
  const std::string committed_tx = "tx-20261207012000-cccccc";
  write_file(other / ".agent/transactions" / committed_tx / "COMMITTED", "");
  const auto committing = [&](const std::string& name, const std::string& tx,
                              const std::string& layer_name) {
    return R"({"name":")" + name + R"(","created":"c","runs":1,"base_stamp_ns":0,)" +
           R"("next_layer":1,"storage":")" + storage + R"(","layers":[")" + layer_name +
           R"("],"committing":")" + tx + R"("})";
  };
  const std::string session = read_file(ws_ / ".agent/sessions/s.json");
  const std::map<std::string, std::string> records = {
      {"removing", R"({"removing":true,"storage":")" + storage + R"("})"},
      {"committed", committing("committed", committed_tx, layer.filename().string())},
      {"unknown", committing("unknown", "tx-20261207012000-dddddd", layer.filename().string())},
      {"missing", committing("missing", "tx-20261207012000-eeeeee", "999")},
      // The whole .agent/ copied while the session's removal was under way.
      {"s", session.substr(0, session.rfind('}')) + R"(,"removing":true})"}};
  for (const auto& [name, record] : records) {
    SCOPED_TRACE(name);
    const fs::path file = other / ".agent/sessions" / (name + ".json");
    write_file(file, record);
    (void)list_sessions(planted, kept());
    if (fs::exists(file)) discard_session(planted, name, kept());
    EXPECT_FALSE(fs::exists(file));
    ASSERT_TRUE(fs::exists(layer / "new.txt")) << "the session's layers were removed";
    for (const char* file_name : {"new.txt", "linked.txt"}) {
      struct stat now {};
      ASSERT_EQ(::stat((layer / file_name).c_str(), &now), 0);
      EXPECT_EQ(now.st_ino, new_file.st_ino) << file_name << ": the session's layer was changed";
    }
    EXPECT_EQ(describe_session(ws, "s", kept()).layers.size(), 1u);
  }
  (void)commit_session(ws, "s", kept());
  EXPECT_EQ(read_file(ws_ / "new.txt"), "new\n");
  EXPECT_FALSE(fs::exists(storage)) << "the session's own commit leaves its storage";
}

// A session's commit and discard by name end it with its storage after
// the workspace was moved (its owner file names the old place, where no
// record names the storage any more); in a copy of the workspace, whose
// original still uses the storage, they leave it, and the copy's commit
// copies the layer's files instead of moving the original's in.
TEST_F(SessionStoreTest, AMovedWorkspacesSessionEndsWithItsStorageACopysLeavesIt) {
  for (const bool by_commit : {false, true}) {
    SCOPED_TRACE(by_commit ? "commit" : "discard");
    TempDir base;
    write_file(base / "a/keep.txt", "keep\n");
    fs::path storage;
    struct stat original {};
    {
      Workspace ws(base / "a");
      const fs::path upper = new_upper();
      write_file(upper / "new.txt", "new\n");
      add_run(ws, upper);
      const fs::path layer = describe_session(ws, "s", kept()).layers.front();
      storage = layer.parent_path();
      ASSERT_EQ(::stat((layer / "new.txt").c_str(), &original), 0);
    }
    // A copy of the workspace, its .agent/ with it.
    fs::copy(base / "a", base / "copy", fs::copy_options::recursive);
    Workspace copy(base / "copy");
    if (by_commit) {
      (void)commit_session(copy, "s", kept());
      EXPECT_EQ(read_file(base / "copy/new.txt"), "new\n");
      struct stat committed {};
      ASSERT_EQ(::stat((base / "copy/new.txt").c_str(), &committed), 0);
      EXPECT_NE(committed.st_ino, original.st_ino) << "the original's layer file moved in";
    } else {
      discard_session(copy, "s", kept());
    }
    EXPECT_TRUE(list_sessions(copy, kept()).empty());
    ASSERT_TRUE(fs::exists(storage)) << "the copy removed the original's storage";
    // The original, moved.
    fs::rename(base / "a", base / "moved");
    Workspace moved(base / "moved");
    EXPECT_EQ(describe_session(moved, "s", kept()).layers.size(), 1u);
    if (by_commit) {
      (void)commit_session(moved, "s", kept());
      EXPECT_EQ(read_file(base / "moved/new.txt"), "new\n");
    } else {
      discard_session(moved, "s", kept());
    }
    EXPECT_TRUE(list_sessions(moved, kept()).empty());
    EXPECT_FALSE(fs::exists(storage)) << "a moved workspace's session left its storage";
  }
}

// A discard killed after its record said "removing" is finished by the
// discard run again, which then succeeds.
TEST_F(SessionStoreTest, ADiscardRunAgainAfterAKillSucceeds) {
  struct stat new_file {};
  Workspace ws(ws_.path());
  const fs::path storage = add_new_and_changed_file(ws, new_file).parent_path();
  ASSERT_TRUE(discard_killed_at("session removal recorded"));
  EXPECT_NO_THROW(discard_session(ws, "s", kept()));
  EXPECT_FALSE(fs::exists(storage));
  EXPECT_THROW(discard_session(ws, "s", kept()), SandboxConfigError) << "no session any more";
}

// A record file whose name is no session's name is listed as damaged,
// and nothing it says is read (no message suggests a command with it).
TEST_F(SessionStoreTest, ARecordWhoseFileNameIsNoSessionNameIsDamaged) {
  Workspace ws(ws_.path());
  write_file(ws_ / ".agent/sessions/x;rm -rf ~.json",
             R"({"name":"x;rm -rf ~","created":"c","runs":1,"base_stamp_ns":0,"next_layer":1,)"
             R"("storage":")" +
                 (kept() / "session-x").string() + R"(","layers":[]})");
  const auto listed = list_sessions(ws, kept());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].damaged,
            "not a session's record: a session name holds only letters, digits, '.', '_' and "
            "'-': x;rm -rf ~");
}

// A session whose layers were removed by hand (its kept directory
// cleaned) says so, and its discard removes what is left.
TEST_F(SessionStoreTest, ASessionWhoseLayersAreGoneCanStillBeDiscarded) {
  struct stat new_file {};
  Workspace ws(ws_.path());
  const fs::path storage = add_new_and_changed_file(ws, new_file).parent_path();
  fs::remove_all(storage);
  const auto listed = list_sessions(ws, kept());
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_NE(listed[0].damaged.find("is missing"), std::string::npos) << listed[0].damaged;
  EXPECT_NE(listed[0].damaged.find("pulsebox session discard s"), std::string::npos);
  discard_session(ws, "s", kept());
  EXPECT_TRUE(list_sessions(ws, kept()).empty());
  EXPECT_TRUE(fs::is_empty(kept()));
}

// A record names its commit's transaction by id, which is joined to the
// transactions directory and whose marker is removed: a planted record
// naming a path instead is damaged, and nothing outside is touched.
TEST_F(SessionStoreTest, ARecordNamingACommitThatIsNoTransactionIdIsDamaged) {
  Workspace ws(ws_.path());
  fs::create_directories(kept() / "session-planted");
  write_file(ws_ / "COMMITTED", "");  // what a finished commit leaves
  TempDir victim;
  write_file(victim / "precious", "x");
  write_file(victim / "COMMITTED", "");
  for (const std::string& committing :
       {std::string("../.."), std::string("../../../../../../../..") + victim.path().string(),
        std::string("tx-20261206220810-ecae01/../../..")}) {
    SCOPED_TRACE(committing);
    fs::create_directories(ws_ / ".agent/sessions");
    write_file(ws_ / ".agent/sessions/planted.json",
               R"({"name":"planted","created":"c","runs":1,"base_stamp_ns":0,"next_layer":1,)"
               R"("storage":")" +
                   (kept() / "session-planted").string() + R"(","layers":[],"committing":")" +
                   committing + R"("})");
    const auto listed = list_sessions(ws, kept());
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_FALSE(listed[0].damaged.empty()) << "a record naming a path was used";
    EXPECT_THROW(describe_session(ws, "planted", kept()), SandboxSecurityError);
    ws.reconcile();
  }
  EXPECT_TRUE(fs::exists(victim / "precious"));
  EXPECT_TRUE(fs::exists(ws_ / "keep.txt"));
  EXPECT_TRUE(fs::exists(ws_ / "COMMITTED"));
}

// A commit marker beside a manifest (never made so: a stale marker under a
// new transaction's id) does not make an undecided commit read as made.
TEST_F(SessionStoreTest, AMarkerBesideAManifestIsNoEvidenceOfACommit) {
  struct stat before {};
  Workspace ws(ws_.path());
  const fs::path layer = add_new_and_changed_file(ws, before);
  ASSERT_TRUE(commit_killed_at(ws_.path(), "s", "snapshots checked"));
  write_file(only_transaction(ws_.path()) / "COMMITTED", "");
  Workspace later(ws_.path());
  ASSERT_EQ(list_sessions(later, kept()).size(), 1u) << "an undone commit ended the session";
  EXPECT_EQ(read_file(layer / "new.txt"), "new\n");
  EXPECT_FALSE(fs::exists(ws_ / "new.txt"));
}

// A session whose interrupted commit can be neither finished nor undone
// (here: its log is gone, so its commit point reads as planted) cannot be
// opened, but can still be thrown away.
TEST_F(SessionStoreTest, ASessionWhoseCommitCannotBeFinishedCanStillBeDiscarded) {
  struct stat before {};
  Workspace ws(ws_.path());
  (void)add_new_and_changed_file(ws, before);
  ASSERT_TRUE(commit_killed_at(ws_.path(), "s", "ready marker"));
  const fs::path tx = only_transaction(ws_.path());
  fs::remove(tx / "wal.json");
  Workspace later(ws_.path());
  EXPECT_THROW(describe_session(later, "s", kept()), SandboxError);
  discard_session(later, "s", kept());
  EXPECT_TRUE(fs::is_empty(kept()));
  EXPECT_EQ(read_file(ws_ / "keep.txt"), "keep\n");
}

// A session's removal (its discard, or the end of its whole commit)
// killed halfway: the next opening finishes it. Before, a kill between the
// layers' removal and the record's left a record naming missing layers:
// the session listed as damaged, and its discard refused it.
TEST_F(SessionStoreTest, ARemovalKilledHalfwayIsFinishedByTheNextOpening) {
  for (const std::string_view at : {"session removal recorded", "session layers removed"}) {
    SCOPED_TRACE(at);
    struct stat new_file {};
    Workspace ws(ws_.path());
    const fs::path storage = add_new_and_changed_file(ws, new_file).parent_path();
    ASSERT_TRUE(discard_killed_at(at)) << "the discard was not killed there";
    Workspace later(ws_.path());
    const auto sessions = list_sessions(later, kept());
    EXPECT_TRUE(sessions.empty()) << sessions.front().damaged;
    EXPECT_FALSE(fs::exists(storage));
    EXPECT_FALSE(fs::exists(ws_ / ".agent/sessions/s.json"));
    EXPECT_THROW(describe_session(later, "s", kept()), SandboxConfigError);
    EXPECT_EQ(read_file(ws_ / "keep.txt"), "keep\n");
  }
}

// reconcile removes a commit marker no session record names (a crash
// after its session ended left it), and keeps one a record names.
TEST_F(SessionStoreTest, ReconcileRemovesOnlyMarkersNoSessionNames) {
  Workspace ws(ws_.path());
  const fs::path transactions = ws_ / ".agent/transactions";
  write_file(transactions / "tx-20261206220810-aaaaaa/COMMITTED", "");
  write_file(transactions / "tx-20261206220810-bbbbbb/COMMITTED", "");
  fs::create_directories(kept() / "session-named");
  fs::create_directories(ws_ / ".agent/sessions");
  write_file(ws_ / ".agent/sessions/named.json",
             R"({"name":"named","created":"c","runs":1,"base_stamp_ns":0,"next_layer":1,)"
             R"("storage":")" +
                 (kept() / "session-named").string() +
                 R"(","layers":[],"committing":"tx-20261206220810-bbbbbb"})");
  ws.reconcile();
  EXPECT_FALSE(fs::exists(transactions / "tx-20261206220810-aaaaaa"));
  EXPECT_TRUE(fs::exists(transactions / "tx-20261206220810-bbbbbb/COMMITTED"));
  // The session's opening reads it as committed, ends, and removes it.
  EXPECT_TRUE(list_sessions(ws, kept()).empty());
  EXPECT_FALSE(fs::exists(transactions / "tx-20261206220810-bbbbbb"));
}

TEST(SessionNameTest, RefusesNamesThatAreNotPlainWords) {
  EXPECT_EQ(check_session_name("fix-tests_2.1"), "");
  for (const char* bad : {"", ".hidden", "-flag", "a/b", "../x", "a b", "é"})
    EXPECT_NE(check_session_name(bad), "") << bad;
  EXPECT_NE(check_session_name(std::string(65, 'a')), "");
}

}  // namespace
}  // namespace pulsebox
