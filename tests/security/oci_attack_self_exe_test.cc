// CVE-2019-5736's class: the image's program is a script whose interpreter
// is `/proc/self/exe`. The kernel resolves that interpreter in the process
// that calls execve, which is still the runtime's copy of itself, so the
// host's pulsebox binary starts inside the container with the container's
// root as its user. Any process of the container may then open it by
// /proc/<pid>/exe and, once it exits, write the host binary that root runs
// next. Neither the container's first process (create, run) nor exec's may
// ever run the runtime's binary from a file the container could write.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>

#include "helpers/oci_bundle.h"
#include "helpers/oci_launch_support.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

// rootfs/evil: `#!/proc/self/exe --version`; run as the runtime, it prints
// "pulsebox <version>" (the CLI's --version) and exits 0.
void plant_self_exe_script(const fs::path& rootfs) {
  const fs::path script = rootfs / "evil";
  testing::write_file(script, "#!/proc/self/exe --version\n");
  fs::permissions(script, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
}

// The precondition, seen: the runtime's binary answers inside the container.
// (A fixed runtime may still run there, from a copy nothing can write; the
// tests below check what matters.)
TEST(OciAttackSelfExe, DISABLED_TheContainersFirstProgramNeverRunsTheRuntimeBinary) {
  const std::string why = testing::oci_launch_unavailable();
  PULSEBOX_SKIP_UNLESS(why.empty(), why);
  testing::TempDir temp;
  auto bundle = testing::make_oci_bundle(temp / "bundle", {"/evil"}, "", "c1");
  plant_self_exe_script(bundle.dir / "rootfs");
  bundle.write();

  const auto run = testing::run_oci_to_files(
      temp / "state", {"run", "--bundle", bundle.dir.string(), "c1"}, temp / "out", temp / "err");
  EXPECT_EQ(run.out.find("pulsebox"), std::string::npos)
      << "the host's pulsebox binary ran as the container's process: " << run.out;
  EXPECT_NE(run.exit_code, 0) << run.out << run.err;
}

TEST(OciAttackSelfExe, DISABLED_ExecNeverRunsTheRuntimeBinary) {
  const std::string why = testing::oci_launch_unavailable();
  PULSEBOX_SKIP_UNLESS(why.empty(), why);
  testing::TempDir temp;
  auto bundle = testing::make_oci_bundle(temp / "bundle", {"sleep", "30"}, "", "c1");
  plant_self_exe_script(bundle.dir / "rootfs");
  bundle.write();
  const fs::path state = temp / "state";
  const auto created = testing::run_oci_to_files(
      state, {"create", "--bundle", bundle.dir.string(), "c1"}, temp / "c.out", temp / "c.err");
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const auto started =
      testing::run_oci_to_files(state, {"start", "c1"}, temp / "s.out", temp / "s.err");
  EXPECT_EQ(started.exit_code, 0) << started.err;

  const auto exec =
      testing::run_oci_to_files(state, {"exec", "c1", "/evil"}, temp / "e.out", temp / "e.err");
  EXPECT_EQ(exec.out.find("pulsebox"), std::string::npos)
      << "the host's pulsebox binary ran in the container through exec: " << exec.out;
  EXPECT_NE(exec.exit_code, 0) << exec.out << exec.err;

  const auto deleted =
      testing::run_oci_to_files(state, {"delete", "--force", "c1"}, temp / "d.out", temp / "d.err");
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;
}

// The whole attack, against a copy of the runtime (never the build's own
// binary): exec's process becomes the runtime (held in a write to a full
// pipe), a second exec opens its /proc/<pid>/exe read-only, kills it, and
// then reopens that descriptor for appending, which writes the file the
// host runs as its container runtime.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(OciAttackSelfExe, DISABLED_TheContainerCannotWriteTheRuntimeBinaryThroughExec) {
  const std::string why = testing::oci_launch_unavailable();
  PULSEBOX_SKIP_UNLESS(why.empty(), why);
  const char* binary = std::getenv("PULSEBOX_BIN");
  ASSERT_NE(binary, nullptr);
  testing::TempDir temp;
  // A copy the caller owns: as an ordinary user the container's root is
  // that user, as root it is root; either may write it by its mode.
  const fs::path copy = temp / "bin" / "pulsebox";
  fs::create_directories(copy.parent_path());
  fs::copy_file(binary, copy);
  fs::permissions(copy, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(temp.path(), fs::perms::others_read | fs::perms::others_exec,
                  fs::perm_options::add);
  const auto size_before = fs::file_size(copy);
  ScopedEnv use_copy("PULSEBOX_BIN", copy.string());

  auto bundle = testing::make_oci_bundle(temp / "bundle", {"sleep", "60"}, "", "c1");
  plant_self_exe_script(bundle.dir / "rootfs");
  bundle.write();
  const fs::path state = temp / "state";
  const auto created = testing::run_oci_to_files(
      state, {"create", "--bundle", bundle.dir.string(), "c1"}, temp / "c.out", temp / "c.err");
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const auto started =
      testing::run_oci_to_files(state, {"start", "c1"}, temp / "s.out", temp / "s.err");
  ASSERT_EQ(started.exit_code, 0) << started.err;

  // A pipe already full: the runtime's --version blocks writing to it.
  int full[2];
  ASSERT_EQ(::pipe2(full, O_CLOEXEC), 0);
  ::fcntl(full[1], F_SETFL, O_NONBLOCK);
  const std::string block(4096, 'x');
  while (::write(full[1], block.data(), block.size()) > 0) {
  }
  ::fcntl(full[1], F_SETFL, 0);
  const std::string root = state.string();
  const pid_t held = ::fork();
  if (held == 0) {
    ::dup2(full[1], 1);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 2);
    ::execl(copy.c_str(), "pulsebox", "oci", "--root", root.c_str(), "exec", "c1", "/evil",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(full[1]);

  // Bounded: find the held process (its comm is the script's name), open
  // its exe, kill it, then (detached, as the runtime's own processes end)
  // try to append to that file; the verdict goes to the container's /tmp.
  const std::string attack =
      "for i in $(seq 1 100); do for d in /proc/[0-9]*; do "
      "if [ \"$(cat $d/comm 2>/dev/null)\" = evil ]; then "
      "exec 3<$d/exe || { echo NOOPEN ; exit 0; }; kill -9 ${d#/proc/}; "
      "for j in $(seq 1 100); do "
      "if printf x >>/proc/self/fd/3; then echo WROTE ; exit 0; fi; "
      "sleep 0.1; done; echo REFUSED ; exit 0; fi; "
      "done; sleep 0.1; done; echo NOTFOUND ";
  const auto attacked = testing::run_oci_to_files(
      state, {"exec", "--detach", "c1", "sh", "-c", attack}, temp / "a.out", temp / "a.err");
  EXPECT_EQ(attacked.exit_code, 0) << attacked.err;
  // The detached process keeps exec's stdout (a.out), where it writes.
  const fs::path verdict_file = temp / "a.out";
  for (int i = 0; i < 300 && testing::read_file(verdict_file).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::string verdict = testing::read_file(verdict_file);
  const std::string why_refused = testing::read_file(temp / "a.err");
  int status = 0;
  for (int i = 0; i < 100 && ::waitpid(held, &status, WNOHANG) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (::waitpid(held, &status, WNOHANG) == 0) {
    ::kill(held, SIGKILL);
    ::waitpid(held, &status, 0);
  }
  ::close(full[0]);
  const auto deleted =
      testing::run_oci_to_files(state, {"delete", "--force", "c1"}, temp / "d.out", temp / "d.err");
  EXPECT_EQ(deleted.exit_code, 0) << deleted.err;

  EXPECT_EQ(verdict, "REFUSED\n") << "the container's attack on the runtime's binary: " << verdict
                                  << why_refused;
  EXPECT_EQ(fs::file_size(copy), size_before) << "the runtime's binary changed";
}

}  // namespace
}  // namespace pulsebox
