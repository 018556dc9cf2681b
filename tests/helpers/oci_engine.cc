#include "helpers/oci_engine.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/sha256.h"
#include "helpers/test_support.h"

extern char** environ;

namespace pulsebox::testing {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kShimRoot = "/run/containerd";
constexpr int kStopWaitMs = 10000;
constexpr int kStartWaitMs = 10000;

std::vector<std::string> entries_of(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    names.push_back(entry.path().filename().string());
  return names;
}

// Stores `bytes` as a blob of the layout; its descriptor's digest and size.
json put_blob(const fs::path& layout, const std::string& bytes, const char* media_type) {
  const std::string digest = core::sha256_hex(bytes);
  write_file(layout / "blobs" / "sha256" / digest, bytes);
  return {{"mediaType", media_type}, {"digest", "sha256:" + digest}, {"size", bytes.size()}};
}

}  // namespace

ToolRun run_tool(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                 int timeout_s) {
  ToolRun result;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return result;
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry)
    environment.emplace_back(*entry);
  environment.insert(environment.end(), env.begin(), env.end());
  std::vector<char*> args, envp;
  auto argv_copy = argv;
  for (auto& arg : argv_copy)
    args.push_back(arg.data());
  args.push_back(nullptr);
  for (auto& entry : environment)
    envp.push_back(entry.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    result.output = "posix_spawn " + argv[0] + " failed";
    return result;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    pollfd readable{pipe_fds[0], POLLIN, 0};
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      result.output += "\n(killed after " + std::to_string(timeout_s) + " s)";
      break;
    }
    if (::poll(&readable, 1, 200) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    result.output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string write_oci_image_tar(const fs::path& rootfs, const fs::path& work, const fs::path& tar,
                                std::string& error) {
  const fs::path layout = work / "layout";
  fs::create_directories(layout / "blobs" / "sha256");
  const auto layer_tar =
      run_tool({"tar", "-C", rootfs.string(), "-cf", (work / "layer.tar").string(), "."});
  if (layer_tar.exit_code != 0) {
    error = "tar of " + rootfs.string() + ": " + layer_tar.output;
    return {};
  }
  const json layer =
      put_blob(layout, read_file(work / "layer.tar"), "application/vnd.oci.image.layer.v1.tar");
  fs::remove(work / "layer.tar");
  // An uncompressed layer's diff id is its own digest.
  const json config = {{"architecture", "amd64"},
                       {"os", "linux"},
                       {"config", {{"Env", {"PATH=/usr/bin:/bin"}}}},
                       {"rootfs", {{"type", "layers"}, {"diff_ids", {layer["digest"]}}}}};
  const json manifest = {
      {"schemaVersion", 2},
      {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
      {"config", put_blob(layout, config.dump(), "application/vnd.oci.image.config.v1+json")},
      {"layers", {layer}}};
  const json manifest_descriptor =
      put_blob(layout, manifest.dump(), "application/vnd.oci.image.manifest.v1+json");
  write_file(layout / "index.json",
             json{{"schemaVersion", 2}, {"manifests", {manifest_descriptor}}}.dump());
  write_file(layout / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
  const auto image_tar = run_tool(
      {"tar", "-C", layout.string(), "-cf", tar.string(), "oci-layout", "index.json", "blobs"});
  if (image_tar.exit_code != 0) {
    error = "tar of the image layout: " + image_tar.output;
    return {};
  }
  return manifest_descriptor["digest"].get<std::string>();
}

HostNetwork HostNetwork::snapshot() {
  HostNetwork network;
  network.ip_forward = read_file("/proc/sys/net/ipv4/ip_forward");
  std::set<std::string> names;
  for (const auto& name : entries_of("/sys/class/net"))
    names.insert(name);
  for (const auto& name : names)
    network.links += name + "\n";
  for (const char* iptables : {"/usr/sbin/iptables", "/sbin/iptables"}) {
    if (::access(iptables, X_OK) != 0) continue;
    network.iptables =
        run_tool({iptables, "-S"}).output + run_tool({iptables, "-t", "nat", "-S"}).output;
    break;
  }
  return network;
}

std::string PrivateContainerd::start(const fs::path& dir, const std::string& ns) {
  dir_ = dir;
  ns_ = ns;
  for (const fs::path& path :
       {fs::path(kShimRoot), fs::path(kShimRoot) / "fifo", fs::path(kShimRoot) / "s",
        fs::path(kShimRoot) / "runc", fs::path(kShimRoot) / "runc" / ns}) {
    if (!fs::exists(path)) made_dirs_.push_back(path);
  }
  fifo_before_ = entries_of(fs::path(kShimRoot) / "fifo");
  sockets_before_ = entries_of(fs::path(kShimRoot) / "s");
  // Never the default root, state or socket, and no CRI plugin (it would
  // set up CNI networking on the host). The snapshotters that could load
  // kernel modules are off too.
  std::ofstream config(dir / "config.toml");
  config << "version = 2\n"
         << "root = \"" << (dir / "root").string() << "\"\n"
         << "state = \"" << (dir / "state").string() << "\"\n"
         << "disabled_plugins = [\"io.containerd.grpc.v1.cri\", "
            "\"io.containerd.snapshotter.v1.aufs\", \"io.containerd.snapshotter.v1.btrfs\", "
            "\"io.containerd.snapshotter.v1.devmapper\", \"io.containerd.snapshotter.v1.zfs\", "
            "\"io.containerd.tracing.processor.v1.otlp\", \"io.containerd.internal.v1.tracing\"]\n"
         << "[grpc]\n  address = \"" << (dir / "containerd.sock").string() << "\"\n"
         << "[ttrpc]\n  address = \"" << (dir / "containerd.sock.ttrpc").string() << "\"\n"
         << "[debug]\n  address = \"\"\n"
         << "[plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"" << (dir / "opt").string()
         << "\"\n";
  config.close();

  const int log_fd = ::open((dir / "containerd.log").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (log_fd < 0) return "cannot open " + (dir / "containerd.log").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, log_fd, 2);
  // unshare execs containerd in place, so pid_ is the daemon's own pid.
  std::vector<std::string> argv = {"/usr/bin/unshare",
                                   "-m",
                                   "--propagation",
                                   "private",
                                   "/usr/bin/containerd",
                                   "--config",
                                   (dir / "config.toml").string()};
  std::vector<char*> args;
  for (auto& arg : argv)
    args.push_back(arg.data());
  args.push_back(nullptr);
  const int rc = ::posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(log_fd);
  if (rc != 0) {
    pid_ = -1;
    return "cannot start containerd (errno " + std::to_string(rc) + ")";
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kStartWaitMs);
  while (std::chrono::steady_clock::now() < deadline) {
    if (fs::exists(dir / "containerd.sock") && ctr({"version"}, 10).exit_code == 0) return {};
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return "containerd exited: " + read_file(dir / "containerd.log");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "containerd did not answer within " + std::to_string(kStartWaitMs / 1000) +
         " s: " + read_file(dir / "containerd.log");
}

ToolRun PrivateContainerd::ctr(const std::vector<std::string>& args, int timeout_s) const {
  std::vector<std::string> argv = {"/usr/bin/ctr", "-n", ns_, "--address",
                                   (dir_ / "containerd.sock").string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_tool(argv, {}, timeout_s);
}

fs::path PrivateContainerd::runtime_root() const {
  return fs::path(kShimRoot) / "runc" / ns_;
}

std::string PrivateContainerd::stop() {
  if (pid_ <= 0) return {};
  std::string left;
  // What a failed test left running: its shims would outlive the daemon.
  const auto lines = [](const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) out.push_back(line);
    return out;
  };
  for (const auto& task : lines(ctr({"task", "ls", "-q"}).output)) {
    (void)ctr({"task", "kill", "-s", "9", task});
    (void)ctr({"task", "delete", "--force", task});
  }
  for (const auto& container : lines(ctr({"containers", "ls", "-q"}).output))
    (void)ctr({"containers", "rm", container});
  for (const auto& image : lines(ctr({"images", "ls", "-q"}).output))
    (void)ctr({"images", "rm", image});

  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kStopWaitMs);
  bool ended = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      ended = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!ended) {
    left += "containerd ignored SIGTERM; killed\n";
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;

  std::error_code ec;
  // The namespace name is the test's own, so its runtime root is too.
  fs::remove_all(runtime_root(), ec);
  const auto remove_new = [&](const fs::path& dir, const std::vector<std::string>& before) {
    for (const auto& name : entries_of(dir)) {
      if (std::find(before.begin(), before.end(), name) != before.end()) continue;
      fs::remove_all(dir / name, ec);
      if (ec) left += "cannot remove " + (dir / name).string() + ": " + ec.message() + "\n";
    }
  };
  remove_new(fs::path(kShimRoot) / "fifo", fifo_before_);
  remove_new(fs::path(kShimRoot) / "s", sockets_before_);
  for (auto it = made_dirs_.rbegin(); it != made_dirs_.rend(); ++it) {
    if (fs::exists(*it) && !fs::remove(*it, ec))
      left += "cannot remove " + it->string() + ": " + ec.message() + "\n";
  }
  // pulsebox-runc made the parent of each /<ns>/<id> leaf (the engine's to
  // remove, as /libpod_parent is podman's); rmdir leaves anything populated.
  for (const auto& hierarchy : entries_of("/sys/fs/cgroup")) {
    const fs::path parent = fs::path("/sys/fs/cgroup") / hierarchy / ns_;
    if (::rmdir(parent.c_str()) != 0 && errno != ENOENT && errno != ENOTDIR)
      left += "cannot remove " + parent.string() + "\n";
  }
  if (::rmdir((fs::path("/sys/fs/cgroup") / ns_).c_str()) != 0 && errno != ENOENT)
    left += "cannot remove /sys/fs/cgroup/" + ns_ + "\n";
  return left;
}

}  // namespace pulsebox::testing
