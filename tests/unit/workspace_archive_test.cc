// Workspaces as tar streams (src/archive/workspace_archive.h): round trips
// that keep names, modes, mtimes and symlinks; a deterministic stream; and
// hostile archives, built here with libarchive's own writer so they are
// real tar bytes, each refused with the entry's name and nothing written
// beside the destination.
#include "archive/workspace_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <locale.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/sha256.h"
#include "helpers/test_support.h"

namespace pulsebox::archive {
namespace {

using pulsebox::testing::listing;
using pulsebox::testing::read_file;
using pulsebox::testing::TempDir;
using pulsebox::testing::write_file;

namespace fs = std::filesystem;

struct Written {
  std::string bytes;
  WriteSummary summary;
};

Written write_tree(const fs::path& root, const WriteOptions& options = {}) {
  Written out;
  auto summary = write_tree_archive(
      root,
      [&](std::string_view piece) {
        out.bytes.append(piece);
        return core::ok_status();
      },
      options);
  EXPECT_TRUE(summary.ok()) << summary.error().to_string();
  if (summary.ok()) out.summary = *summary;
  return out;
}

// Hands `bytes` to the extractor in uneven pieces, as a socket would.
core::Result<ExtractSummary> extract_bytes(const std::string& bytes, const fs::path& dest,
                                           const ExtractLimits& limits = {}) {
  std::size_t offset = 0;
  const ArchiveSource source = [&]() -> core::Result<std::string_view> {
    const std::size_t size = std::min<std::size_t>(7001, bytes.size() - offset);
    std::string_view piece(bytes.data() + offset, size);
    offset += size;
    return piece;
  };
  return extract_archive(source, dest, limits);
}

void set_mtime(const fs::path& path, time_t seconds) {
  const timespec times[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

time_t mtime_of(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mtim.tv_sec;
}

mode_t mode_of(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode;
}

std::string five_megabytes() {
  std::string content(5 << 20, '\0');
  std::uint32_t state = 12345;
  for (char& byte : content) {
    state = state * 1103515245 + 12345;
    byte = static_cast<char>(state >> 24);
  }
  return content;
}

// A tree with one of each thing the archive keeps.
void make_tree(const fs::path& root) {
  fs::create_directories(root / "a/b/c");
  write_file(root / "a/b/c/deep.txt", "deep\n");
  write_file(root / "empty", "");
  write_file(root / "big.bin", five_megabytes());
  write_file(root / "a/script.sh", "#!/bin/sh\n");
  ::chmod((root / "a/script.sh").c_str(), 0750);
  write_file(root / "setuid", "s");
  ::chmod((root / "setuid").c_str(), 04755);
  write_file(root / std::string("caf\xe9-latin1"), "not utf-8 name\n");
  write_file(root / "\xc3\xa9t\xc3\xa9", "utf-8 name\n");
  fs::create_symlink("a/b/c/deep.txt", root / "link");
  fs::create_symlink("../empty", root / "a/up-link");
  set_mtime(root / "a/b/c/deep.txt", 1000000000);
  set_mtime(root / "link", 1100000000);
  set_mtime(root / "a/b", 1200000000);
}

TEST(WorkspaceArchive, RoundTripKeepsTreeModesNamesAndTimes) {
  TempDir temp;
  make_tree(temp / "src");
  const Written written = write_tree(temp / "src");
  EXPECT_EQ(written.summary.files, 7u);
  EXPECT_EQ(written.summary.directories, 3u);  // a, a/b, a/b/c
  EXPECT_EQ(written.summary.symlinks, 2u);
  EXPECT_EQ(written.summary.bytes, (5u << 20) + 5 + 10 + 1 + 15 + 11);
  // Names that are UTF-8 go as pax "path" records, others as bytes.
  EXPECT_NE(written.bytes.find("path=\xc3\xa9t\xc3\xa9\n"), std::string::npos);
  EXPECT_NE(written.bytes.find("hdrcharset=BINARY\n"), std::string::npos);
  EXPECT_TRUE(written.summary.skipped.empty());
  EXPECT_EQ(written.summary.sha256, core::sha256_hex(written.bytes));

  fs::create_directory(temp / "dest");
  auto extracted = extract_bytes(written.bytes, temp / "dest");
  ASSERT_TRUE(extracted.ok()) << extracted.error().to_string();
  EXPECT_EQ(extracted->sha256, written.summary.sha256);
  EXPECT_EQ(extracted->files, 7u);
  EXPECT_EQ(extracted->directories, 3u);
  EXPECT_EQ(extracted->symlinks, 2u);
  EXPECT_EQ(extracted->bytes, written.summary.bytes);

  auto expected = listing(temp / "src");
  expected["setuid"] = "100755 " + core::sha256_hex("s");  // setuid stripped
  EXPECT_EQ(listing(temp / "dest"), expected);
  EXPECT_EQ(mode_of(temp / "dest/a/script.sh") & 07777, 0750u);
  EXPECT_EQ(mode_of(temp / "dest/setuid") & 07777, 0755u);
  EXPECT_EQ(read_file(temp / "dest" / std::string("caf\xe9-latin1")), "not utf-8 name\n");
  EXPECT_EQ(read_file(temp / "dest/\xc3\xa9t\xc3\xa9"), "utf-8 name\n");
  EXPECT_EQ(mtime_of(temp / "dest/a/b/c/deep.txt"), 1000000000);
  EXPECT_EQ(mtime_of(temp / "dest/link"), 1100000000);
  EXPECT_EQ(mtime_of(temp / "dest/a/b"), 1200000000);
}

TEST(WorkspaceArchive, ExtractsFromAFileDescriptor) {
  TempDir temp;
  make_tree(temp / "src");
  const Written written = write_tree(temp / "src");
  write_file(temp / "tree.tar", written.bytes);
  const int fd = ::open((temp / "tree.tar").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  fs::create_directory(temp / "dest");
  auto extracted = extract_archive(fd, temp / "dest");
  ::close(fd);
  ASSERT_TRUE(extracted.ok()) << extracted.error().to_string();
  EXPECT_EQ(extracted->sha256, written.summary.sha256);
  auto expected = listing(temp / "src");
  expected["setuid"] = "100755 " + core::sha256_hex("s");
  EXPECT_EQ(listing(temp / "dest"), expected);
}

TEST(WorkspaceArchive, SameTreeGivesTheSameBytesAndATouchedFileDoesNot) {
  TempDir temp;
  make_tree(temp / "src");
  const Written first = write_tree(temp / "src");
  const Written second = write_tree(temp / "src");
  EXPECT_EQ(first.summary.sha256, second.summary.sha256);
  EXPECT_EQ(first.bytes, second.bytes);

  // The same tree made again elsewhere (other inodes, other creation order).
  make_tree(temp / "copy");
  set_mtime(temp / "copy/empty", mtime_of(temp / "src/empty"));
  set_mtime(temp / "copy/big.bin", mtime_of(temp / "src/big.bin"));
  set_mtime(temp / "copy/a/script.sh", mtime_of(temp / "src/a/script.sh"));
  set_mtime(temp / "copy/setuid", mtime_of(temp / "src/setuid"));
  set_mtime(temp / "copy" / std::string("caf\xe9-latin1"),
            mtime_of(temp / "src" / std::string("caf\xe9-latin1")));
  set_mtime(temp / "copy/a/up-link", mtime_of(temp / "src/a/up-link"));
  set_mtime(temp / "copy/\xc3\xa9t\xc3\xa9", mtime_of(temp / "src/\xc3\xa9t\xc3\xa9"));
  set_mtime(temp / "copy/a/b/c", mtime_of(temp / "src/a/b/c"));
  set_mtime(temp / "copy/a", mtime_of(temp / "src/a"));
  EXPECT_EQ(write_tree(temp / "copy").summary.sha256, first.summary.sha256);

  set_mtime(temp / "src/empty", mtime_of(temp / "src/empty") + 1);
  EXPECT_NE(write_tree(temp / "src").summary.sha256, first.summary.sha256);
}

TEST(WorkspaceArchive, OnlyPathsSendsThemWithTheirParents) {
  TempDir temp;
  fs::create_directories(temp / "src/a/keep-dir/inner");
  write_file(temp / "src/a/x", "x");
  write_file(temp / "src/a/y", "y");
  write_file(temp / "src/a/keep-dir/inner/z", "z");
  fs::create_directories(temp / "src/b");
  write_file(temp / "src/b/z", "z");
  write_file(temp / "src/c", "c");
  fs::create_symlink("b", temp / "src/link");

  WriteOptions options;
  options.only_paths = std::vector<std::string>{"a/x", "c", "a/keep-dir", "missing/file", "link/z"};
  const Written written = write_tree(temp / "src", options);
  const std::vector<std::pair<std::string, std::string>> skipped = {{"link/z", "not found"},
                                                                    {"missing/file", "not found"}};
  EXPECT_EQ(written.summary.skipped, skipped);

  fs::create_directory(temp / "dest");
  ASSERT_TRUE(extract_bytes(written.bytes, temp / "dest").ok());
  std::vector<std::string> paths;
  for (const auto& [path, description] : listing(temp / "dest"))
    paths.push_back(path);
  const std::vector<std::string> expected = {
      "a", "a/keep-dir", "a/keep-dir/inner", "a/keep-dir/inner/z", "a/x", "c"};
  EXPECT_EQ(paths, expected);
}

TEST(WorkspaceArchive, ExcludedTopLevelNamesStayHome) {
  TempDir temp;
  fs::create_directories(temp / "src/.agent");
  write_file(temp / "src/.agent/token", "secret");
  fs::create_directories(temp / "src/sub/.agent");
  write_file(temp / "src/sub/.agent/kept", "kept");
  WriteOptions options;
  options.exclude_top_level = {".agent"};
  const Written written = write_tree(temp / "src", options);
  EXPECT_EQ(written.bytes.find("secret"), std::string::npos);
  fs::create_directory(temp / "dest");
  ASSERT_TRUE(extract_bytes(written.bytes, temp / "dest").ok());
  EXPECT_FALSE(fs::exists(temp / "dest/.agent"));
  EXPECT_EQ(read_file(temp / "dest/sub/.agent/kept"), "kept");
}

TEST(WorkspaceArchive, HardLinksTravelAsSeparateFiles) {
  TempDir temp;
  fs::create_directories(temp / "src");
  write_file(temp / "src/a", "shared");
  fs::create_hard_link(temp / "src/a", temp / "src/b");
  const Written written = write_tree(temp / "src");
  EXPECT_EQ(written.summary.files, 2u);
  fs::create_directory(temp / "dest");
  auto extracted = extract_bytes(written.bytes, temp / "dest");
  ASSERT_TRUE(extracted.ok()) << extracted.error().to_string();
  EXPECT_EQ(read_file(temp / "dest/b"), "shared");
  EXPECT_EQ(fs::hard_link_count(temp / "dest/a"), 1u);
  EXPECT_EQ(fs::hard_link_count(temp / "dest/b"), 1u);
}

TEST(WorkspaceArchive, FifosAndSocketsAreSkippedAndListed) {
  TempDir temp;
  fs::create_directories(temp / "src/d");
  ASSERT_EQ(::mkfifo((temp / "src/d/pipe").c_str(), 0600), 0);
  const int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string socket_path = (temp / "src/d/sock").string();
  ASSERT_LT(socket_path.size(), sizeof(address.sun_path));
  std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size() + 1);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ::close(listener);
  write_file(temp / "src/d/file", "f");
  const Written written = write_tree(temp / "src");
  const std::vector<std::pair<std::string, std::string>> skipped = {{"d/pipe", "it is a fifo"},
                                                                    {"d/sock", "it is a socket"}};
  EXPECT_EQ(written.summary.skipped, skipped);
  EXPECT_EQ(written.summary.files, 1u);
}

TEST(WorkspaceArchive, UnreadableFilesAreSkippedAndListed) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads every file";
  TempDir temp;
  fs::create_directories(temp / "src");
  write_file(temp / "src/closed", "c");
  ::chmod((temp / "src/closed").c_str(), 0);
  write_file(temp / "src/open", "o");
  const Written written = write_tree(temp / "src");
  ASSERT_EQ(written.summary.skipped.size(), 1u);
  EXPECT_EQ(written.summary.skipped[0].first, "closed");
  EXPECT_NE(written.summary.skipped[0].second.find("unreadable"), std::string::npos);
  EXPECT_EQ(written.summary.files, 1u);
}

TEST(WorkspaceArchive, ASinkErrorStopsTheWriter) {
  TempDir temp;
  make_tree(temp / "src");
  int calls = 0;
  auto summary = write_tree_archive(temp / "src", [&](std::string_view) -> core::Status {
    ++calls;
    return core::Error(core::ErrorKind::kIo, "test", "the peer went away");
  });
  EXPECT_EQ(calls, 1);  // and none when the writer is freed
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.error().to_string().find("the peer went away"), std::string::npos);
}

// ---- hostile archives ----

struct Entry {
  std::string name;
  unsigned type = AE_IFREG;
  std::string content;
  std::string link;  // symlink target, or hard link target when `hardlink`
  bool hardlink = false;
  unsigned mode = 0644;
};

// pax_utf8_names: names as UTF-8 "path" records (as Python's tarfile and
// GNU tar write them), converted from a UTF-8 locale; else libarchive's
// conversion from this test's C locale fails and it writes bytes.
std::string tar_of(const std::vector<Entry>& entries, bool pax_utf8_names = false) {
  locale_t utf8 = pax_utf8_names ? ::newlocale(LC_CTYPE_MASK, "C.UTF-8", nullptr) : nullptr;
  locale_t previous = utf8 != nullptr ? ::uselocale(utf8) : nullptr;
  std::string out;
  ::archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_add_filter_none(a);
  archive_write_open2(
      a, &out, nullptr,
      [](::archive*, void* client, const void* bytes, size_t size) -> la_ssize_t {
        static_cast<std::string*>(client)->append(static_cast<const char*>(bytes), size);
        return static_cast<la_ssize_t>(size);
      },
      nullptr, nullptr);
  for (const auto& spec : entries) {
    ::archive_entry* entry = archive_entry_new();
    archive_entry_copy_pathname(entry, spec.name.c_str());
    archive_entry_set_filetype(entry, spec.type);
    archive_entry_set_perm(entry, spec.mode);
    archive_entry_set_size(entry, static_cast<la_int64_t>(spec.content.size()));
    if (spec.hardlink)
      archive_entry_copy_hardlink(entry, spec.link.c_str());
    else if (!spec.link.empty())
      archive_entry_copy_symlink(entry, spec.link.c_str());
    if (spec.type == AE_IFCHR) archive_entry_set_rdev(entry, makedev(1, 3));
    EXPECT_GE(archive_write_header(a, entry), ARCHIVE_WARN) << archive_error_string(a);
    if (!spec.content.empty()) archive_write_data(a, spec.content.data(), spec.content.size());
    archive_entry_free(entry);
  }
  archive_write_close(a);
  archive_write_free(a);
  if (utf8 != nullptr) {
    ::uselocale(previous);
    ::freelocale(utf8);
  }
  return out;
}

// A destination with a sentinel directory beside it: whatever the archive
// does, nothing may appear outside the destination.
class HostileArchive : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directory(temp_ / "dest");
    fs::create_directory(temp_ / "sentinel");
  }

  // Extraction fails, names `entry`, and touched nothing beside the
  // destination; returns the error for further checks.
  core::Error refused(const std::string& bytes, const std::string& entry,
                      const ExtractLimits& limits = {}) {
    auto result = extract_bytes(bytes, temp_ / "dest", limits);
    EXPECT_FALSE(result.ok()) << "extracted an archive that holds " << entry;
    if (result.ok()) return core::Error(core::ErrorKind::kInternal, "test", "not refused");
    const std::string message = result.error().to_string();
    EXPECT_NE(message.find("archive entry " + entry), std::string::npos) << message;
    EXPECT_TRUE(nothing_beside_destination());
    return std::move(result).error();
  }

  bool nothing_beside_destination() {
    std::vector<std::string> names;
    for (const auto& child : fs::directory_iterator(temp_.path())) {
      names.push_back(child.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names == std::vector<std::string>{"dest", "sentinel"} &&
           fs::is_empty(temp_ / "sentinel") && !fs::exists("/etc/pulsebox-archive-test");
  }

  TempDir temp_;
};

TEST_F(HostileArchive, AbsolutePathIsRefused) {
  const std::string target = (temp_ / "sentinel/owned").string();
  auto error = refused(tar_of({{.name = target, .content = "x"}}), target);
  EXPECT_EQ(error.kind(), core::ErrorKind::kSecurity);
  EXPECT_NE(error.message().find("absolute"), std::string::npos);
}

TEST_F(HostileArchive, DotDotIsRefused) {
  auto error =
      refused(tar_of({{.name = "a/../../sentinel/x", .content = "x"}}), "a/../../sentinel/x");
  EXPECT_EQ(error.kind(), core::ErrorKind::kSecurity);
}

TEST_F(HostileArchive, SymlinkToAnAbsoluteTargetIsRefused) {
  refused(tar_of({{.name = "link", .type = AE_IFLNK, .link = "/etc"},
                  {.name = "link/pulsebox-archive-test", .content = "x"}}),
          "link");
  EXPECT_TRUE(fs::is_empty(temp_ / "dest"));
}

TEST_F(HostileArchive, EntryThroughAnExtractedSymlinkIsRefused) {
  // The symlink stays inside the tree, so it is accepted; what goes through it is not.
  auto error = refused(tar_of({{.name = "sub", .type = AE_IFDIR, .mode = 0755},
                               {.name = "link", .type = AE_IFLNK, .link = "sub"},
                               {.name = "link/passwd", .content = "x"}}),
                       "link/passwd");
  EXPECT_EQ(error.kind(), core::ErrorKind::kSecurity);
  EXPECT_NE(error.message().find("a symlink extracted earlier"), std::string::npos);
  EXPECT_TRUE(fs::is_empty(temp_ / "dest/sub"));
}

TEST_F(HostileArchive, SymlinkClimbingOutIsRefused) {
  refused(tar_of({{.name = "a/link", .type = AE_IFLNK, .link = "../../sentinel"}}), "a/link:");
  EXPECT_TRUE(fs::is_empty(temp_ / "dest"));  // refused before its parent was made
  fs::remove_all(temp_ / "dest");
  fs::create_directory(temp_ / "dest");
  refused(tar_of({{.name = "up", .type = AE_IFLNK, .link = ".."}}), "up:");
}

TEST_F(HostileArchive, SymlinkWithDotDotAfterANameIsRefused) {
  // p/q/x -> "../.." is the destination itself; "x/../sentinel" from p/q
  // is p/q/sentinel lexically, but really the destination's parent's
  // sentinel: each link climbs no higher than it sits, and still the chain
  // escapes.
  refused(tar_of({{.name = "p/q/x", .type = AE_IFLNK, .link = "../.."},
                  {.name = "p/q/l2", .type = AE_IFLNK, .link = "x/../sentinel"}}),
          "p/q/l2:");
}

TEST_F(HostileArchive, HardLinkIsRefused) {
  auto error = refused(
      tar_of({{.name = "a", .content = "x"}, {.name = "b", .link = "a", .hardlink = true}}), "b:");
  EXPECT_EQ(error.kind(), core::ErrorKind::kSecurity);
  EXPECT_NE(error.message().find("hard link"), std::string::npos);
}

TEST_F(HostileArchive, DevicesAndFifosAreRefused) {
  auto device = refused(tar_of({{.name = "null", .type = AE_IFCHR}}), "null:");
  EXPECT_NE(device.message().find("character device"), std::string::npos);
  auto fifo = refused(tar_of({{.name = "pipe", .type = AE_IFIFO}}), "pipe:");
  EXPECT_NE(fifo.message().find("fifo"), std::string::npos);
  EXPECT_TRUE(fs::is_empty(temp_ / "dest"));
}

TEST_F(HostileArchive, TooManyEntriesAreRefused) {
  std::vector<Entry> entries;
  for (int i = 0; i < 11; ++i)
    entries.push_back({.name = "f" + std::to_string(i), .content = "x"});
  auto error = refused(tar_of(entries), "f10", {.max_entries = 10});
  EXPECT_EQ(error.kind(), core::ErrorKind::kResource);
  EXPECT_FALSE(fs::exists(temp_ / "dest/f10"));
}

TEST_F(HostileArchive, TooManyBytesAreRefusedBeforeTheyAreWritten) {
  auto error = refused(tar_of({{.name = "one", .content = std::string(600, 'a')},
                               {.name = "two", .content = std::string(600, 'b')}}),
                       "two", {.max_total_bytes = 1000});
  EXPECT_EQ(error.kind(), core::ErrorKind::kResource);
  EXPECT_FALSE(fs::exists(temp_ / "dest/two"));
}

TEST_F(HostileArchive, DuplicateEntryIsRefused) {
  auto error = refused(
      tar_of({{.name = "a", .content = "first"}, {.name = "./a", .content = "second"}}), "./a");
  EXPECT_NE(error.message().find("duplicate"), std::string::npos);
  EXPECT_EQ(read_file(temp_ / "dest/a"), "first");
}

TEST_F(HostileArchive, TooDeepPathIsRefused) {
  std::string name;
  for (int i = 0; i < 300; ++i)
    name += "d/";
  name += "f";
  auto error = refused(tar_of({{.name = name, .content = "x"}}), "d/d/d/d");
  EXPECT_NE(error.message().find("301 components deep"), std::string::npos);
  EXPECT_TRUE(fs::is_empty(temp_ / "dest"));
}

TEST_F(HostileArchive, OverLongNameIsRefused) {
  const std::string name(5000, 'n');
  auto error = refused(tar_of({{.name = name, .content = "x"}}), "nnnnnnnn");
  EXPECT_NE(error.message().find("5000 bytes"), std::string::npos);
}

TEST_F(HostileArchive, GarbageAndTruncatedArchivesAreClearErrors) {
  auto garbage = extract_bytes(std::string(4096, '\x7f') + "not a tar", temp_ / "dest");
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.error().message().find("not a tar archive"), std::string::npos)
      << garbage.error().to_string();
  EXPECT_TRUE(nothing_beside_destination());

  const std::string whole = tar_of(
      {{.name = "first", .content = "1"}, {.name = "second", .content = std::string(100000, 's')}});
  auto truncated = extract_bytes(whole.substr(0, 50000), temp_ / "dest");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.error().to_string().find("second"), std::string::npos)
      << truncated.error().to_string();
  EXPECT_TRUE(nothing_beside_destination());

  // Cut where the second entry's header starts: libarchive alone would
  // see a whole archive of one entry.
  fs::remove_all(temp_ / "dest");
  fs::create_directory(temp_ / "dest");
  auto cut = extract_bytes(whole.substr(0, 1024), temp_ / "dest");
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.error().message().find("after the entry first without tar's end-of-archive"),
            std::string::npos)
      << cut.error().to_string();

  fs::remove_all(temp_ / "dest");
  fs::create_directory(temp_ / "dest");
  auto empty = extract_bytes("", temp_ / "dest");
  EXPECT_FALSE(empty.ok());
  EXPECT_TRUE(nothing_beside_destination());
}

TEST_F(HostileArchive, Utf8PaxNamesAreReadInAnyLocale) {
  const std::string bytes =
      tar_of({{.name = "d\xc3\xa9j\xc3\xa0", .type = AE_IFDIR, .mode = 0755},
              {.name = "d\xc3\xa9j\xc3\xa0/\xc3\xa9t\xc3\xa9", .content = "x"}},
             /*pax_utf8_names=*/true);
  ASSERT_NE(bytes.find("path=d\xc3\xa9j\xc3\xa0"), std::string::npos);
  ASSERT_EQ(bytes.find("hdrcharset"), std::string::npos);
  auto result = extract_bytes(bytes, temp_ / "dest");
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(read_file(temp_ / "dest/d\xc3\xa9j\xc3\xa0/\xc3\xa9t\xc3\xa9"), "x");
}

TEST_F(HostileArchive, DestinationMustBeEmpty) {
  write_file(temp_ / "dest/already", "x");
  auto result = extract_bytes(tar_of({{.name = "a", .content = "x"}}), temp_ / "dest");
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message().find("not empty"), std::string::npos);
}

}  // namespace
}  // namespace pulsebox::archive
