// Joining existing namespaces by path at create (design §1.2, the join
// path): a network namespace this test makes (held by an `unshare -n
// sleep` it kills by pid) is named by linux.namespaces[i].path, and the
// container sees that very namespace. As an ordinary user the holder owns
// a user namespace too (`unshare -Urn`), which the config joins by path.
// Paths that are no namespace, or one of another type, are refused
// naming the path, before anything is made.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "helpers/oci_bundle.h"
#include "helpers/oci_fixture.h"
#include "helpers/oci_state.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using testing::run_oci;
using testing::run_oci_to_files;

std::string ns_link(const std::string& path) {
  std::error_code error;
  const auto target = fs::read_symlink(path, error);
  return error ? "" : target.string();
}

// A process holding a new network namespace (and, for an ordinary user, the
// user namespace that owns it); killed by its pid.
class NamespaceHolder {
 public:
  NamespaceHolder() {
    const bool root = ::geteuid() == 0;
    pid_ = ::fork();
    if (pid_ == 0) {
      if (root)
        ::execlp("unshare", "unshare", "-n", "sleep", "60", nullptr);
      else
        ::execlp("unshare", "unshare", "-Urn", "sleep", "60", nullptr);
      ::_exit(127);
    }
    // Ready once unshare has exec'd sleep (its namespaces are made then).
    for (int i = 0; i < 250 && pid_ > 0; ++i) {
      if (testing::read_file(dir() + "/comm") == "sleep\n") {
        ready_ = ns_link(dir() + "/ns/net") != ns_link("/proc/self/ns/net");
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~NamespaceHolder() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  bool ready() const { return ready_; }
  std::string dir() const { return "/proc/" + std::to_string(pid_); }

 private:
  pid_t pid_ = -1;
  bool ready_ = false;
};

class OciJoinTest : public testing::OciContainerTest {
 protected:
  // The busybox bundle with its network namespace (and as an ordinary user
  // its user namespace) joined from `holder`.
  testing::OciBundle joining_bundle(const std::vector<std::string>& args,
                                    const NamespaceHolder& holder) {
    auto b = bundle(args);
    auto& namespaces = b.config["linux"]["namespaces"];
    for (auto& ns : namespaces) {
      if (ns["type"] == "network") ns["path"] = holder.dir() + "/ns/net";
      if (ns["type"] == "user") ns["path"] = holder.dir() + "/ns/user";
    }
    b.config["linux"].erase("uidMappings");
    b.config["linux"].erase("gidMappings");
    b.write();
    return b;
  }

  int network_index(const testing::OciBundle& b) {
    const auto& namespaces = b.config["linux"]["namespaces"];
    for (std::size_t i = 0; i < namespaces.size(); ++i) {
      if (namespaces[i]["type"] == "network") return static_cast<int>(i);
    }
    return -1;
  }
};

TEST_F(OciJoinTest, TheContainerSeesTheJoinedNetworkNamespace) {
  NamespaceHolder holder;
  ASSERT_TRUE(holder.ready()) << "unshare did not make a network namespace";
  const std::string expected = ns_link(holder.dir() + "/ns/net");
  const auto b = joining_bundle({"sh", "-c",
                                 "echo net=$(readlink /proc/self/ns/net) pid=$$; "
                                 "echo pidns=$(readlink /proc/self/ns/pid)"},
                                holder);
  const auto run = oci({"run", "--bundle", b.dir.string(), "c1"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("net=" + expected + " pid=1\n"), std::string::npos)
      << run.out << " expected " << expected;
  // The pid namespace is still a new one (the container's pid 1).
  EXPECT_EQ(run.out.find("pidns=" + ns_link("/proc/self/ns/pid")), std::string::npos) << run.out;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
}

TEST_F(OciJoinTest, CreateRecordsTheContainersProcessNotTheJoiningStage) {
  NamespaceHolder holder;
  ASSERT_TRUE(holder.ready());
  const auto b = joining_bundle({"sleep", "60"}, holder);
  const fs::path pid_file = temp_ / "pid";
  const auto created =
      oci({"create", "--bundle", b.dir.string(), "--pid-file", pid_file.string(), "c1"});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const auto state = nlohmann::json::parse(run_oci(root_, {"state", "c1"}).out);
  EXPECT_EQ(state["status"], "created");
  EXPECT_NE(state["annotations"]["org.pulsebox.enforced"].get<std::string>().find("joined:network"),
            std::string::npos)
      << state.dump();
  const pid_t pid = state["pid"].get<pid_t>();
  EXPECT_EQ(testing::read_file(pid_file), std::to_string(pid));
  const std::string proc = "/proc/" + std::to_string(pid);
  // An ordinary user may not read the links of an undumpable process (the
  // run case above checks the namespace from inside).
  if (::geteuid() == 0) {
    EXPECT_EQ(ns_link(proc + "/ns/net"), ns_link(holder.dir() + "/ns/net"));
  }
  const std::string status = testing::read_file(proc + "/status");
  const auto nspid = status.find("NSpid:");
  ASSERT_NE(nspid, std::string::npos);
  const std::string line = status.substr(nspid, status.find('\n', nspid) - nspid);
  EXPECT_EQ(line.back(), '1') << line;
  // Before start: root may exec; an ordinary user may not read the still
  // undumpable process's namespaces, and is told to start it first.
  const auto early = oci({"exec", "c1", "sh", "-c", "exit 0"});
  if (::geteuid() == 0) {
    EXPECT_EQ(early.exit_code, 0) << early.err;
  } else {
    EXPECT_EQ(early.exit_code, 1);
    EXPECT_NE(early.err.find("container c1 is created, not started"), std::string::npos)
        << early.err;
  }
  ASSERT_EQ(oci({"start", "c1"}).exit_code, 0);
  // exec joins the container's namespaces, the joined one included (an
  // ordinary user's container also joined the holder's user namespace).
  const auto execd = oci({"exec", "c1", "readlink", "/proc/self/ns/net"});
  EXPECT_EQ(execd.exit_code, 0) << execd.err;
  EXPECT_EQ(execd.out, ns_link(holder.dir() + "/ns/net") + "\n") << execd.err;
  EXPECT_EQ(oci({"delete", "--force", "c1"}).exit_code, 0);
  EXPECT_FALSE(fs::exists(root_ / "c1"));
}

TEST_F(OciJoinTest, APathThatIsNoNamespaceIsRefusedByItsPath) {
  NamespaceHolder holder;
  ASSERT_TRUE(holder.ready());
  auto b = joining_bundle({"true"}, holder);
  const int index = network_index(b);
  b.config["linux"]["namespaces"][index]["path"] = (b.dir / "config.json").string();
  b.write();
  const auto created = oci({"create", "--bundle", b.dir.string(), "c1"});
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find("linux.namespaces[" + std::to_string(index) + "].path"),
            std::string::npos)
      << created.err;
  EXPECT_NE(created.err.find("not a namespace"), std::string::npos) << created.err;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
}

TEST_F(OciJoinTest, ANamespaceOfAnotherTypeIsRefusedByItsPath) {
  NamespaceHolder holder;
  ASSERT_TRUE(holder.ready());
  auto b = joining_bundle({"true"}, holder);
  const int index = network_index(b);
  b.config["linux"]["namespaces"][index]["path"] = holder.dir() + "/ns/ipc";
  b.write();
  const auto created = oci({"create", "--bundle", b.dir.string(), "c1"});
  EXPECT_EQ(created.exit_code, 1);
  EXPECT_NE(created.err.find("linux.namespaces[" + std::to_string(index) + "].path"),
            std::string::npos)
      << created.err;
  EXPECT_NE(created.err.find("an ipc namespace, not a network one"), std::string::npos)
      << created.err;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
}

}  // namespace
}  // namespace pulsebox
