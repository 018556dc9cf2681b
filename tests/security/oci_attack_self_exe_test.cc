// CVE-2019-5736's class: the image's program is a script whose interpreter
// is `/proc/self/exe`. The kernel resolves that interpreter in the process
// that calls execve, which is still the runtime's copy of itself, so the
// runtime's binary starts inside the container. Another process of the
// container opens it by /proc/<pid>/exe, kills it, and once the runtime's
// own processes have ended (the file is no longer busy) reopens that
// descriptor for writing: the next `pulsebox-runc` the host runs is the
// container's. The runtime must run from a binary no container can write
// (a read-only clone of its mount for root, a sealed memfd copy for a user
// whose binary it is), for the container's first process and for exec.
// The attacks run against a copy of the runtime, never the build's binary.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <thread>

#include "helpers/oci_bundle.h"
#include "helpers/oci_launch_support.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

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
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A pipe whose buffer is full: a process writing to it waits.
struct FullPipe {
  int read_end = -1, write_end = -1;
  FullPipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    read_end = fds[0];
    write_end = fds[1];
    ::fcntl(write_end, F_SETFL, O_NONBLOCK);
    const std::string block(4096, 'x');
    while (::write(write_end, block.data(), block.size()) > 0) {
    }
    ::fcntl(write_end, F_SETFL, 0);
  }
  ~FullPipe() {
    if (read_end >= 0) ::close(read_end);
    if (write_end >= 0) ::close(write_end);
  }
  FullPipe(const FullPipe&) = delete;
  FullPipe& operator=(const FullPipe&) = delete;
};

// `binary oci --root ROOT args...` with stdout `out` and stdin, stderr
// /dev/null; the caller waits for it.
pid_t spawn_runtime(const fs::path& binary, const fs::path& root,
                    const std::vector<std::string>& args, int out) {
  std::vector<std::string> full = {binary.string(), "oci", "--root", root.string()};
  full.insert(full.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& arg : full)
      argv.push_back(arg.data());
    argv.push_back(nullptr);
    ::dup2(out, 1);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 2);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

void wait_bounded(pid_t pid, std::chrono::seconds bound) {
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

enum class Held { FirstProcess, Exec };

class OciAttackSelfExe : public ::testing::TestWithParam<Held> {};

TEST_P(OciAttackSelfExe, TheContainerCannotWriteTheRuntimeBinary) {
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
  const auto size_before = fs::file_size(copy);
  ScopedEnv use_copy("PULSEBOX_BIN", copy.string());

  const bool first = GetParam() == Held::FirstProcess;
  // Unique ids: as root each gets the cgroup /pulsebox-oci/<id>.
  const std::string suffix = "-selfexe-" + std::to_string(::getpid());
  const std::string c0 = "c0" + suffix, c1 = "c1" + suffix;
  const fs::path state = temp / "state";
  // c0 is the attacker's container. For the first process, c1 joins c0's
  // pid namespace (a pod's shared process namespace): there its program is
  // not the namespace's init, so c0 can kill it and outlive it.
  auto attacker = testing::make_oci_bundle(temp / "c0", {"sleep", "60"}, "", c0);
  attacker.write();
  const auto created = testing::run_oci_to_files(
      state, {"create", "--bundle", attacker.dir.string(), c0}, temp / "c.out", temp / "c.err");
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const auto started =
      testing::run_oci_to_files(state, {"start", c0}, temp / "s.out", temp / "s.err");
  ASSERT_EQ(started.exit_code, 0) << started.err;
  // Run as the runtime, `--version` writes to stdout: a full pipe holds it.
  const auto plant = [](const fs::path& rootfs) {
    const fs::path script = rootfs / "evil";
    testing::write_file(script, "#!/proc/self/exe --version\n");
    fs::permissions(script, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                fs::perms::others_read | fs::perms::others_exec);
  };
  plant(attacker.dir / "rootfs");
  FullPipe full;
  ASSERT_GE(full.write_end, 0);
  pid_t held = -1;
  if (first) {
    const auto shown =
        testing::run_oci_to_files(state, {"state", c0}, temp / "st.out", temp / "st.err");
    ASSERT_EQ(shown.exit_code, 0) << shown.err;
    const std::string ns =
        "/proc/" + std::to_string(nlohmann::json::parse(shown.out)["pid"].get<int>()) + "/ns/";
    auto victim = testing::make_oci_bundle(temp / "c1", {"/evil"}, "", c1);
    plant(victim.dir / "rootfs");
    for (auto& entry : victim.config["linux"]["namespaces"]) {
      if (entry["type"] == "pid") entry["path"] = ns + "pid";
      if (entry["type"] == "user") entry["path"] = ns + "user";
    }
    victim.config["linux"].erase("uidMappings");
    victim.config["linux"].erase("gidMappings");
    victim.write();
    // create's stdout is the container's: c1's first process is held.
    const pid_t create =
        spawn_runtime(copy, state, {"create", "--bundle", victim.dir.string(), c1}, full.write_end);
    wait_bounded(create, std::chrono::seconds(60));
    const auto victim_started =
        testing::run_oci_to_files(state, {"start", c1}, temp / "s1.out", temp / "s1.err");
    ASSERT_EQ(victim_started.exit_code, 0) << victim_started.err;
  } else {
    held = spawn_runtime(copy, state, {"exec", c0, "/evil"}, full.write_end);
  }

  // Bounded: find the held process (its comm is the script's name), keep
  // its exe open, kill it, and try to append to that file while the
  // runtime's own processes end. The verdict goes to exec's stdout, which
  // the detached process keeps.
  const std::string attack =
      "for i in $(seq 1 100); do for d in /proc/[0-9]*; do "
      "if [ \"$(cat $d/comm 2>/dev/null)\" = evil ]; then "
      "exec 3<$d/exe || { echo NOOPEN; exit 0; }; kill -9 ${d#/proc/}; "
      "for j in $(seq 1 30); do "
      "if printf x >>/proc/self/fd/3; then echo WROTE; exit 0; fi; "
      "sleep 0.1; done; echo REFUSED; exit 0; fi; "
      "done; sleep 0.1; done; echo NOTFOUND";
  const auto attacked = testing::run_oci_to_files(
      state, {"exec", "--detach", c0, "sh", "-c", attack}, temp / "a.out", temp / "a.err");
  EXPECT_EQ(attacked.exit_code, 0) << attacked.err;
  const fs::path verdict_file = temp / "a.out";
  for (int i = 0; i < 300 && testing::read_file(verdict_file).empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (held > 0) wait_bounded(held, std::chrono::seconds(10));
  for (const std::string& id : {c1, c0}) {
    if (!first && id == c1) continue;  // exec's case made no c1
    const auto deleted =
        testing::run_oci_to_files(state, {"delete", "--force", id}, temp / "d.out", temp / "d.err");
    EXPECT_EQ(deleted.exit_code, 0) << id << ": " << deleted.err;
  }

  const std::string verdict = testing::read_file(verdict_file);
  // REFUSED: the attack reached its last step and the write failed.
  EXPECT_EQ(verdict, "REFUSED\n") << "the container's attack on the runtime's binary: " << verdict
                                  << testing::read_file(temp / "a.err");
  EXPECT_EQ(fs::file_size(copy), size_before) << "the runtime's binary changed";
}

INSTANTIATE_TEST_SUITE_P(Oci, OciAttackSelfExe, ::testing::Values(Held::FirstProcess, Held::Exec),
                         [](const auto& param_info) {
                           return param_info.param == Held::FirstProcess ? "FirstProcess" : "Exec";
                         });

}  // namespace
}  // namespace pulsebox
