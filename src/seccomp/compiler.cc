#include "seccomp/compiler.h"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "core/fs.h"
#include "core/sha256.h"
#include "core/unique_fd.h"

namespace pulsebox::seccomp {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;

namespace {

// Bump when the compilation itself changes, so old cache files are not used.
constexpr const char* kCompilerVersion = "pulsebox-seccomp-2";  // 2: binary tree

bool is_kill(Action action) {
  return action == Action::KillProcess || action == Action::KillThread;
}

// Kill actions are compiled as notifications: the supervisor needs the listener.
bool needs_listener(const Profile& profile) {
  return is_kill(profile.default_action) ||
         std::any_of(profile.rules.begin(), profile.rules.end(),
                     [](const Rule& rule) { return is_kill(rule.action); });
}

std::uint32_t scmp_action(Action action, int errno_ret, KillActions kill_actions) {
  switch (action) {
    case Action::Allow:
      return SCMP_ACT_ALLOW;
    case Action::Errno:
      return SCMP_ACT_ERRNO(static_cast<std::uint32_t>(errno_ret));
    case Action::KillProcess:
      return kill_actions == KillActions::Kernel ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_NOTIFY;
    case Action::KillThread:
      return kill_actions == KillActions::Kernel ? SCMP_ACT_KILL_THREAD : SCMP_ACT_NOTIFY;
    case Action::Trap:
      return SCMP_ACT_TRAP;
    case Action::Log:
      return SCMP_ACT_LOG;
    case Action::Trace:
      return SCMP_ACT_TRACE(static_cast<std::uint32_t>(errno_ret));
  }
  return SCMP_ACT_KILL_PROCESS;
}

scmp_compare scmp_op(ArgOp op) {
  switch (op) {
    case ArgOp::NotEqual:
      return SCMP_CMP_NE;
    case ArgOp::LessThan:
      return SCMP_CMP_LT;
    case ArgOp::LessOrEqual:
      return SCMP_CMP_LE;
    case ArgOp::Equal:
      return SCMP_CMP_EQ;
    case ArgOp::GreaterOrEqual:
      return SCMP_CMP_GE;
    case ArgOp::GreaterThan:
      return SCMP_CMP_GT;
    case ArgOp::MaskedEqual:
      return SCMP_CMP_MASKED_EQ;
  }
  return SCMP_CMP_EQ;
}

std::string libseccomp_version() {
  const scmp_version* version = ::seccomp_version();
  return std::to_string(version->major) + "." + std::to_string(version->minor) + "." +
         std::to_string(version->micro);
}

struct ContextDeleter {
  void operator()(void* ctx) const { ::seccomp_release(ctx); }
};

Error compile_error(const Profile& profile, const std::string& what, int rc) {
  return Error(ErrorKind::kInvalidInput, "seccomp",
               profile.name + ": " + what + ": " + std::strerror(-rc), -rc);
}

// Kill actions are compiled as SECCOMP_RET_USER_NOTIF returns: a program
// read back from the disk cache says by itself whether it needs a listener.
bool returns_user_notification(const std::vector<sock_filter>& program) {
  return std::any_of(program.begin(), program.end(), [](const sock_filter& insn) {
    return insn.code == (BPF_RET | BPF_K) &&
           (insn.k & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_USER_NOTIF;
  });
}

}  // namespace

std::string syscall_name(std::uint32_t arch, int nr) {
  char* name = ::seccomp_syscall_resolve_num_arch(arch, nr);
  if (name == nullptr) return "syscall " + std::to_string(nr);
  std::string out(name);
  std::free(name);
  return out;
}

std::string cache_key(std::string_view profile_text) {
  utsname kernel{};
  ::uname(&kernel);
  return core::sha256_hex(std::string(profile_text) + "\n" +
                          std::to_string(::seccomp_arch_native()) + "\n" + kernel.release + "\n" +
                          libseccomp_version() + "\n" + kCompilerVersion);
}

std::string cache_key(const Profile& profile) {
  return cache_key(std::string_view(profile.text));
}

namespace {

unsigned int load_flags(std::uint32_t filter_flags) {
  unsigned int flags = 0;
  if (filter_flags & kFlagTsync) flags |= SECCOMP_FILTER_FLAG_TSYNC;
  if (filter_flags & kFlagLog) flags |= SECCOMP_FILTER_FLAG_LOG;
  if (filter_flags & kFlagSpecAllow) flags |= SECCOMP_FILTER_FLAG_SPEC_ALLOW;
  return flags;
}

}  // namespace

core::Result<std::shared_ptr<const CompiledFilter>> compile(const Profile& profile, Layout layout,
                                                            KillActions kill_actions) {
  const std::uint32_t default_action =
      scmp_action(profile.default_action, profile.default_errno, kill_actions);
  std::unique_ptr<void, ContextDeleter> ctx(::seccomp_init(default_action));
  if (!ctx) return Error(ErrorKind::kInternal, "seccomp", "seccomp_init failed");
  auto filter = std::make_shared<CompiledFilter>();
  filter->uses_listener = kill_actions == KillActions::Notify && needs_listener(profile);
  filter->load_flags = load_flags(profile.filter_flags);
  // A syscall from an architecture the profile does not list ends the process.
  ::seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  // no_new_privs is set by pulsebox itself, earlier.
  ::seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_NNP, 0);
  if (layout == Layout::BinaryTree) ::seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);
  for (const auto& arch_name : profile.architectures) {
    std::string lower = arch_name.substr(std::string("SCMP_ARCH_").size());
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const std::uint32_t arch = ::seccomp_arch_resolve_name(lower.c_str());
    if (arch == 0) continue;  // not a name this libseccomp knows
    const int rc = ::seccomp_arch_add(ctx.get(), arch);
    if (rc < 0 && rc != -EEXIST) return compile_error(profile, "adding " + arch_name, rc);
  }
  for (const auto& rule : profile.rules) {
    const std::uint32_t action = scmp_action(rule.action, rule.errno_ret, kill_actions);
    if (action == default_action && rule.args.empty()) continue;  // nothing to add
    std::vector<scmp_arg_cmp> args;
    for (const auto& check : rule.args) {
      args.push_back({check.index, scmp_op(check.op), check.value, check.value_two});
    }
    for (const auto& name : rule.names) {
      const int nr = ::seccomp_syscall_resolve_name(name.c_str());
      // Docker profiles list syscalls of every architecture: unknown ones here
      // simply do not exist on this machine.
      if (nr == __NR_SCMP_ERROR) continue;
      if (action == default_action) continue;
      const int rc = ::seccomp_rule_add_array(ctx.get(), action, nr,
                                              static_cast<unsigned>(args.size()), args.data());
      if (rc < 0) {
        return compile_error(
            profile, "rule for " + name + (rule.comment.empty() ? "" : " (" + rule.comment + ")"),
            rc);
      }
    }
  }
  UniqueFd memory(::memfd_create("pulsebox-seccomp", MFD_CLOEXEC));
  if (!memory) return Error::from_errno("seccomp", "memfd_create");
  if (const int rc = ::seccomp_export_bpf(ctx.get(), memory.get()); rc < 0) {
    return compile_error(profile, "exporting the BPF program", rc);
  }
  struct stat st {};
  if (::fstat(memory.get(), &st) != 0) return Error::from_errno("seccomp", "fstat");
  filter->program.resize(static_cast<std::size_t>(st.st_size) / sizeof(sock_filter));
  if (::pread(memory.get(), filter->program.data(), filter->program.size() * sizeof(sock_filter),
              0) != static_cast<ssize_t>(filter->program.size() * sizeof(sock_filter))) {
    return Error::from_errno("seccomp", "reading the BPF program");
  }
  // Another program from the same text: another key.
  filter->key = kill_actions == KillActions::Notify
                    ? cache_key(profile)
                    : core::sha256_hex(cache_key(profile) + "\nkernel-kill");
  return std::shared_ptr<const CompiledFilter>(std::move(filter));
}

std::shared_ptr<const CompiledFilter> FilterCache::find_locked(const std::string& key) {
  if (auto it = memory_.find(key); it != memory_.end()) {
    ++stats_.from_memory;
    return it->second;
  }
  if (directory_.empty()) return nullptr;
  const auto file = directory_ / (key + ".bpf");
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || st.st_uid != ::geteuid() || st.st_size <= 0 ||
      st.st_size % static_cast<off_t>(sizeof(sock_filter)) != 0 ||
      st.st_size > static_cast<off_t>(BPF_MAXINSNS * sizeof(sock_filter))) {
    return nullptr;
  }
  auto filter = std::make_shared<CompiledFilter>();
  filter->program.resize(static_cast<std::size_t>(st.st_size) / sizeof(sock_filter));
  const auto bytes = static_cast<ssize_t>(filter->program.size() * sizeof(sock_filter));
  if (::pread(fd.get(), filter->program.data(), static_cast<std::size_t>(bytes), 0) != bytes)
    return nullptr;
  filter->uses_listener = returns_user_notification(filter->program);
  filter->key = key;
  ++stats_.from_disk;
  return memory_[key] = std::move(filter);
}

void FilterCache::store_locked(const std::string& key,
                               std::shared_ptr<const CompiledFilter> compiled) {
  ++stats_.compiled;
  memory_[key] = compiled;
  if (directory_.empty()) return;
  // Best effort: a cache that cannot be written only costs time.
  std::error_code ec;
  std::filesystem::create_directories(directory_, ec);
  const auto file = directory_ / (key + ".bpf");
  const auto temp = directory_ / (key + ".tmp." + std::to_string(::getpid()));
  UniqueFd out(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
  const std::string_view bytes(reinterpret_cast<const char*>(compiled->program.data()),
                               compiled->program.size() * sizeof(sock_filter));
  if (out && core::write_all(out.get(), bytes, temp.string()).ok()) {
    std::filesystem::rename(temp, file, ec);
  }
  if (ec || !out) std::filesystem::remove(temp, ec);
}

core::Result<std::shared_ptr<const CompiledFilter>> FilterCache::get(const Profile& profile) {
  const std::string key = cache_key(profile);
  std::lock_guard lock(mutex_);
  if (auto hit = find_locked(key)) return hit;
  PB_TRY(compiled, compile(profile));
  store_locked(key, compiled);
  return compiled;
}

core::Result<std::shared_ptr<const CompiledFilter>> FilterCache::get(
    const std::string& name_or_path) {
  PB_TRY(text, read_profile_text(name_or_path));
  const std::string key = cache_key(text);
  {
    std::lock_guard lock(mutex_);
    if (auto hit = find_locked(key)) return hit;
  }
  // Parse the text that made the key (a file may change between two reads).
  auto profile = is_builtin_profile(name_or_path) ? load_profile(name_or_path)
                                                  : parse_profile(text, name_or_path);
  if (!profile) return std::move(profile).error();
  return get(profile.value());
}

FilterCache::Stats FilterCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace pulsebox::seccomp
