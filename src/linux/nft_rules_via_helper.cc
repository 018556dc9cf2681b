// nft_rules.h for the static pulsebox executable: each call runs the
// pulsebox-nft helper (linux/nft_wire.h says why), found beside this
// executable (the build tree) or in PULSEBOX_LIBEXEC_DIR (installed).
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "core/fs.h"
#include "core/libexec_helper.h"
#include "core/unique_fd.h"
#include "linux/nft_rules.h"
#include "linux/nft_wire.h"
#include "pulsebox_config.h"

extern char** environ;

namespace pulsebox::linux_api {
namespace {

namespace fs = std::filesystem;
using core::Error;
using core::ErrorKind;

constexpr std::size_t kMaxAnswer = 1 << 20;

// Runs the helper with `arguments`, `request` on its stdin and `socket` (if
// >= 0) as its fd 3; returns its output's lines.
core::Result<std::vector<std::string>> run_helper(const std::vector<std::string>& arguments,
                                                  const std::string& request, int socket) {
  PB_TRY(path, core::find_libexec_helper("pulsebox-nft", "", "nftables"));
  core::UniqueFd input(::memfd_create("pulsebox-nft-request", MFD_CLOEXEC));
  if (!input) return Error::from_errno("nftables", "memfd_create");
  PB_CHECK(core::write_all(input.get(), request, "the helper's request"));
  ::lseek(input.get(), 0, SEEK_SET);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Error::from_errno("nftables", "pipe2");
  core::UniqueFd out_read(out[0]), out_write(out[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, input.get(), 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.get(), 1);
  if (socket >= 0) posix_spawn_file_actions_adddup2(&actions, socket, 3);
  std::vector<std::string> storage = {path};
  storage.insert(storage.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (auto& argument : storage)
    argv.push_back(argument.data());
  argv.push_back(nullptr);
  char* no_environment[] = {nullptr};
  pid_t pid = -1;
  const int spawned =
      ::posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), no_environment);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return Error(ErrorKind::kUnavailable, "nftables", "running " + path, spawned);
  out_write.reset();
  std::string answer;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(out_read.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (answer.size() < kMaxAnswer) answer.append(buffer, static_cast<std::size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = answer.find('\n', start)) != std::string::npos; start = end + 1)
    lines.push_back(answer.substr(start, end - start));
  if (lines.empty()) {
    return Error(ErrorKind::kInternal, "nftables",
                 path + " answered nothing (wait status " + std::to_string(status) + ")");
  }
  return lines;
}

core::Status run_transaction(const std::vector<std::string>& arguments, const std::string& request,
                             int socket, const std::string& stage) {
  PB_TRY(lines, run_helper(arguments, request, socket));
  return nft_wire::decode_status(lines.back(), stage);
}

}  // namespace

core::Status install_egress_filter(int netfilter_socket, const std::vector<EgressRule>& rules,
                                   const std::vector<LinkAddress>& on_link_prefixes) {
  return run_transaction({"egress"}, nft_wire::encode(rules, on_link_prefixes), netfilter_socket,
                         "installing the sandbox's egress filter");
}

core::Status install_masquerade(const std::string& table, const std::string& host_link,
                                const std::vector<LinkAddress>& sandbox_subnets) {
  return run_transaction({"masquerade", table, host_link}, nft_wire::encode({}, sandbox_subnets),
                         -1, "installing the masquerade table " + table);
}

core::Status delete_table(const std::string& table) {
  return run_transaction({"delete", table}, "", -1, "deleting the table " + table);
}

core::Result<std::vector<std::string>> tables_with_prefix(std::string_view prefix) {
  PB_TRY(lines, run_helper({"list", std::string(prefix)}, "", -1));
  PB_CHECK(nft_wire::decode_status(lines.back(), "listing nftables tables"));
  std::vector<std::string> tables;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    if (lines[i].rfind("TABLE ", 0) == 0) tables.push_back(lines[i].substr(6));
  }
  return tables;
}

}  // namespace pulsebox::linux_api
