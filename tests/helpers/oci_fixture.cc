#include "helpers/oci_fixture.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "helpers/oci_launch_support.h"
#include "helpers/oci_state.h"

namespace pulsebox::testing {

namespace fs = std::filesystem;

void OciContainerTest::SetUp() {
  if (const auto why = oci_launch_unavailable(); !why.empty()) GTEST_SKIP() << why;
  if (::geteuid() == 0) {
    host_ = linux_api::discover_cgroups();
    std::random_device random;
    subtree_ = "pulsebox-test-oci-" + std::to_string(random());
  }
}

void OciContainerTest::TearDown() {
  (void)run_oci(root_, {"delete", "--force", kId});
  for (const auto& [key, mount] : host_.hierarchy_mounts) {
    if (subtree_.empty()) break;
    ::rmdir((fs::path(mount) / subtree_ / kId).c_str());
    ::rmdir((fs::path(mount) / subtree_).c_str());
  }
}

OciBundle OciContainerTest::bundle(const std::vector<std::string>& args) {
  return make_oci_bundle(temp_ / "bundle", args, subtree_, kId);
}

OciFileRun OciContainerTest::oci(const std::vector<std::string>& args) {
  if (fresh_output_) {
    ::truncate(out_.c_str(), 0);
    ::truncate(err_.c_str(), 0);
  }
  return run_oci_to_files(root_, args, out_, err_);
}

std::string OciContainerTest::status_of(const std::string& id) {
  const auto run = run_oci(root_, {"state", id});
  auto parsed = nlohmann::json::parse(run.out, nullptr, false);
  return parsed.is_object() ? parsed.value("status", "?") : "(" + run.err + ")";
}

bool OciContainerTest::wait_for_status(const std::string& id, const std::string& status) {
  for (int i = 0; i < 250; ++i) {
    if (status_of(id) == status) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

bool OciContainerTest::wait_for_output(const std::string& text) {
  for (int i = 0; i < 500; ++i) {
    if (read_file(out_).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::vector<std::string> OciContainerTest::leftover_leaves() {
  std::vector<std::string> left;
  for (const auto& [key, mount] : host_.hierarchy_mounts) {
    if (subtree_.empty()) break;
    const fs::path leaf = fs::path(mount) / subtree_ / kId;
    if (fs::exists(leaf)) left.push_back(leaf.string());
  }
  return left;
}

void OciContainerTest::create_and_start() {
  const auto created = oci({"create", "--bundle", (temp_ / "bundle").string(), kId});
  ASSERT_EQ(created.exit_code, 0) << created.err;
  ASSERT_EQ(oci({"start", kId}).exit_code, 0);
}

void OciRunningContainerTest::SetUp() {
  OciContainerTest::SetUp();
  if (IsSkipped()) return;
  fresh_output_ = true;
  bundle({"sleep", "60"});
  ASSERT_NO_FATAL_FAILURE(create_and_start());
}

OciFileRun run_with_cap_mknod(const std::string& script) {
  const auto host = linux_api::discover_cgroups();
  TempDir temp;
  std::random_device random;
  const std::string subtree = "pulsebox-test-oci-" + std::to_string(random());
  auto bundle = make_oci_bundle(temp / "bundle", {"sh", "-c", script}, subtree, "c1");
  for (const char* set : {"bounding", "effective", "permitted"})
    bundle.config["process"]["capabilities"][set].push_back("CAP_MKNOD");
  bundle.write();
  const auto run = run_oci_to_files(temp / "state", {"run", "--bundle", bundle.dir.string(), "c1"},
                                    temp / "out", temp / "err");
  for (const auto& [key, mount] : host.hierarchy_mounts) {
    ::rmdir((fs::path(mount) / subtree / "c1").c_str());
    ::rmdir((fs::path(mount) / subtree).c_str());
  }
  return run;
}

core::UniqueFd listen_console_socket(const fs::path& path) {
  core::UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  path.string().copy(address.sun_path, sizeof address.sun_path - 1);
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(listener.get(), 1) != 0) {
    ADD_FAILURE() << "listening on " << path << ": " << std::strerror(errno);
    return {};
  }
  return listener;
}

core::UniqueFd accept_console_master(int listener, std::string& name) {
  const core::UniqueFd connection(::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC));
  if (!connection) {
    ADD_FAILURE() << "accepting on the console socket: " << std::strerror(errno);
    return {};
  }
  core::UniqueFd master(receive_master(connection.get(), name));
  if (!master) ADD_FAILURE() << "no terminal master came on the console socket";
  return master;
}

std::string read_terminal_until(int master, const std::string& text) {
  std::string seen;
  for (int i = 0; i < 250 && seen.find(text) == std::string::npos; ++i) {
    pollfd readable{master, POLLIN, 0};
    if (::poll(&readable, 1, 20) <= 0) continue;
    char buffer[256];
    const ssize_t n = ::read(master, buffer, sizeof buffer);
    if (n <= 0) break;
    seen.append(buffer, static_cast<std::size_t>(n));
  }
  return seen;
}

}  // namespace pulsebox::testing
