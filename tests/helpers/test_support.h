// Shared helpers for the GoogleTest suites.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace pulsebox::testing {

// A fresh directory under $TMPDIR, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "pulsebox-test-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    if (!ec) return;
    // A rootless run's overlay leaves a mode-000 work/work in the state
    // directory's trash (the next run empties it): open every directory to
    // its owner, then remove, so the ordinary-user pass leaves nothing in /tmp.
    open_to_owner(path_);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  static void open_to_owner(const std::filesystem::path& dir) {
    std::error_code ec;
    std::filesystem::permissions(dir, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.is_directory(ec) && !entry.is_symlink(ec)) open_to_owner(entry.path());
    }
  }

  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline std::vector<std::string> read_lines(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line))
    lines.push_back(line);
  return lines;
}

inline void write_lines(const std::filesystem::path& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (const auto& line : lines)
    out << line << "\n";
}

// Every path below `root` except .agent/, with its type and mode, and the
// SHA-256 of its content or its symlink target: two trees with equal
// listings are equal byte for byte.
std::map<std::string, std::string> listing(const std::filesystem::path& root);

// The probe's "key=value" report lines (tests/probe/probe.cc).
std::map<std::string, std::string> parse_report(const std::string& text);

// The null-terminated char* array execve() and posix_spawn() take, pointing
// into `strings` (which must outlive it).
std::vector<char*> c_strings(std::vector<std::string>& strings);

// Host processes whose command line contains `marker` (read-only scan of /proc).
int processes_with_marker(const std::string& marker);

// Runs `body` in a forked child and returns its exit status: as root the
// child first becomes uid/gid 65534 with no supplementary groups (root
// reads and writes everything; an ordinary user's case needs one), as
// anyone else it stays who it is. 101: `body` threw (its message on
// stderr), 100: the ids could not be dropped, -1: it did not exit.
int run_as_ordinary_user(const std::function<int()>& body);
// As root, gives `base` and everything beneath it to uid/gid 65534, the
// user run_as_ordinary_user becomes (as anyone else, nothing to do).
// false: an entry could not be given.
bool hand_to_ordinary_user(const std::filesystem::path& base);

// Runs `client(index)` on `clients` threads at once; each returns "" or what
// went wrong (an exception counts as its message). Returns the failures,
// "client N: ..." per line; "" when all succeeded.
std::string run_concurrently(int clients, const std::function<std::string(int)>& client);

// Checks `condition` every 50 ms until it holds or `timeout` has passed;
// returns whether it held (bounded waits for what another process does).
bool poll_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

// A TCP port on 127.0.0.1 that nothing listens on at the moment, or -1.
int free_loopback_port();

// Tests that need a kernel feature call this when it is missing: the test is
// skipped with the reason printed, unless PULSEBOX_REQUIRE_FEATURES=1 (set by
// CI, whose machines have every feature), where the skip becomes a failure.
#define PULSEBOX_SKIP_UNLESS(condition, reason)                       \
  do {                                                                \
    if (!(condition)) {                                               \
      const char* require = std::getenv("PULSEBOX_REQUIRE_FEATURES"); \
      if (require != nullptr && std::string(require) == "1") {        \
        FAIL() << "required kernel feature missing: " << (reason)     \
               << " (PULSEBOX_REQUIRE_FEATURES=1)";                   \
      }                                                               \
      GTEST_SKIP() << "skipped: " << (reason);                        \
    }                                                                 \
  } while (0)

// Tests of what only root can do skip for an ordinary user whatever
// PULSEBOX_REQUIRE_FEATURES says: CI runs the suite as root too, where they run.
#define PULSEBOX_SKIP_UNLESS_ROOT(reason)                                       \
  do {                                                                          \
    if (::geteuid() != 0) GTEST_SKIP() << "skipped (needs root): " << (reason); \
  } while (0)

}  // namespace pulsebox::testing
