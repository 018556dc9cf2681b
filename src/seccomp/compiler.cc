#include "seccomp/compiler.h"

#include <fcntl.h>
#include <linux/audit.h>
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
#include <map>
#include <optional>
#include <set>

#include "core/fs.h"
#include "core/sha256.h"
#include "core/unique_fd.h"
#include "seccomp/bpf_run.h"
#include "seccomp/ranges.h"

namespace pulsebox::seccomp {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;

namespace {

// Bump when the compilation itself changes, so old cache files are not used.
constexpr const char* kCompilerVersion = "pulsebox-seccomp-3";  // 2: binary tree, 3: ranges

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

// "SCMP_ARCH_X86_64" -> "x86_64", as seccomp_arch_resolve_name() spells it.
std::string architecture_token(const std::string& arch_name) {
  std::string lower = arch_name.substr(std::string("SCMP_ARCH_").size());
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
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

namespace {

// The syscall numbers a rule names, on this machine's architecture. Docker
// profiles list syscalls of every architecture: the unknown ones simply do
// not exist here.
std::vector<int> rule_numbers(const Rule& rule) {
  std::vector<int> numbers;
  for (const auto& name : rule.names) {
    const int nr = ::seccomp_syscall_resolve_name(name.c_str());
    if (nr != __NR_SCMP_ERROR) numbers.push_back(nr);
  }
  return numbers;
}

bool lists_only_the_native_architecture(const Profile& profile) {
  for (const auto& arch_name : profile.architectures) {
    const std::uint32_t arch = ::seccomp_arch_resolve_name(architecture_token(arch_name).c_str());
    if (arch != 0 && arch != ::seccomp_arch_native()) return false;
  }
  return true;
}

// libseccomp's program for the profile; with `only`, for the rules of the
// syscalls in it alone (every other syscall gets the default action).
core::Result<std::vector<sock_filter>> libseccomp_program(const Profile& profile,
                                                          std::uint32_t default_action,
                                                          KillActions kill_actions, Layout layout,
                                                          const std::set<int>* only) {
  std::unique_ptr<void, ContextDeleter> ctx(::seccomp_init(default_action));
  if (!ctx) return Error(ErrorKind::kInternal, "seccomp", "seccomp_init failed");
  // A syscall from an architecture the profile does not list ends the process.
  ::seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
  // no_new_privs is set by pulsebox itself, earlier.
  ::seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_NNP, 0);
  if (layout != Layout::Linear) ::seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);
  for (const auto& arch_name : profile.architectures) {
    const std::uint32_t arch = ::seccomp_arch_resolve_name(architecture_token(arch_name).c_str());
    if (arch == 0) continue;  // not a name this libseccomp knows
    const int rc = ::seccomp_arch_add(ctx.get(), arch);
    if (rc < 0 && rc != -EEXIST) return compile_error(profile, "adding " + arch_name, rc);
  }
  for (const auto& rule : profile.rules) {
    const std::uint32_t action = scmp_action(rule.action, rule.errno_ret, kill_actions);
    // The default action needs no rule (libseccomp refuses one: EACCES).
    if (action == default_action) continue;
    std::vector<scmp_arg_cmp> args;
    for (const auto& check : rule.args) {
      args.push_back({check.index, scmp_op(check.op), check.value, check.value_two});
    }
    for (const auto& name : rule.names) {
      const int nr = ::seccomp_syscall_resolve_name(name.c_str());
      if (nr == __NR_SCMP_ERROR) continue;  // see rule_numbers()
      if (only != nullptr && only->count(nr) == 0) continue;
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
  std::vector<sock_filter> program(static_cast<std::size_t>(st.st_size) / sizeof(sock_filter));
  if (::pread(memory.get(), program.data(), program.size() * sizeof(sock_filter), 0) !=
      static_cast<ssize_t>(program.size() * sizeof(sock_filter))) {
    return Error::from_errno("seccomp", "reading the BPF program");
  }
  return program;
}

// What each syscall number named by the profile gets: an action for every
// call, or "it depends on the arguments" (with the values its rules compare
// the arguments with).
struct NumberDecisions {
  std::map<int, std::uint32_t> constant;
  std::map<int, std::set<std::uint64_t>> argument_checked;
  std::set<int> named;  // every number a rule names, as resolved
};

std::optional<NumberDecisions> number_decisions(const Profile& profile,
                                                std::uint32_t default_action,
                                                KillActions kill_actions) {
  NumberDecisions decisions;
  for (const auto& rule : profile.rules) {
    const std::uint32_t action = scmp_action(rule.action, rule.errno_ret, kill_actions);
    for (const int nr : rule_numbers(rule)) {
      decisions.named.insert(nr);
      // A rule with the default action never reaches libseccomp's program
      // (libseccomp_program()): it decides nothing.
      if (rule.args.empty() || action == default_action) continue;
      auto& values = decisions.argument_checked[nr];
      for (const auto& check : rule.args) {
        for (const std::uint64_t v : {check.value, check.value_two}) {
          for (const std::uint64_t near : {v, v - 1, v + 1, ~v, v | check.value_two, v << 32})
            values.insert(near);
        }
      }
    }
  }
  for (const auto& rule : profile.rules) {
    if (!rule.args.empty()) continue;
    const std::uint32_t action = scmp_action(rule.action, rule.errno_ret, kill_actions);
    for (const int nr : rule_numbers(rule)) {
      if (decisions.argument_checked.count(nr) != 0) continue;
      // libseccomp's pseudo-syscalls (negative: syscalls another
      // architecture has) are no syscall on x86_64 or aarch64, the only
      // architectures this layout is used on (ranged_layout()): i386's
      // socketcall, for one, would make them numbers of their own. A number
      // in the x32 range, or one listed with two different actions: left
      // to libseccomp.
      if (nr < 0) continue;
      if (static_cast<std::uint32_t>(nr) >= kX32SyscallBit) return std::nullopt;
      const auto [it, added] = decisions.constant.emplace(nr, action);
      if (!added && it->second != action) return std::nullopt;
    }
  }
  for (auto it = decisions.constant.begin(); it != decisions.constant.end();) {
    it = it->second == default_action ? decisions.constant.erase(it) : std::next(it);
  }
  return decisions;
}

std::vector<NumberInterval> number_intervals(const NumberDecisions& decisions,
                                             std::uint32_t default_action) {
  int highest = 0;
  for (const auto& [nr, values] : decisions.argument_checked)
    highest = std::max(highest, nr);
  if (!decisions.constant.empty()) highest = std::max(highest, decisions.constant.rbegin()->first);
  std::vector<NumberInterval> intervals;
  auto add = [&intervals](std::uint32_t first, std::optional<std::uint32_t> action) {
    if (intervals.empty() || intervals.back().action != action)
      intervals.push_back({first, action});
  };
  for (int nr = 0; nr <= highest + 1; ++nr) {
    std::optional<std::uint32_t> action = default_action;
    if (decisions.argument_checked.count(nr) != 0) {
      action.reset();
    } else if (auto it = decisions.constant.find(nr); it != decisions.constant.end()) {
      action = it->second;
    }
    add(static_cast<std::uint32_t>(nr), action);
  }
  add(kX32SyscallBit, std::nullopt);
  return intervals;
}

// The calls decides_alike() runs both programs on, at most: a profile
// whose argument rules would need more (tens of thousands of compared
// values) keeps libseccomp's program rather than a slow compile.
constexpr std::size_t kMaxComparedCalls = 50000;

// Whether `candidate` decides as `reference` does: every call number up to
// past the highest named one, the x32 range, every number the profile
// names, the top of the range, on this and two other architectures; and
// for each syscall with argument rules, each argument set to its rules'
// values, their neighbours and a few others. nullopt: more calls than
// kMaxComparedCalls.
std::optional<bool> decides_alike(const std::vector<sock_filter>& reference,
                                  const std::vector<sock_filter>& candidate,
                                  const NumberDecisions& decisions) {
  std::set<std::uint32_t> numbers;
  const int highest = decisions.named.empty() ? 0 : std::max(0, *decisions.named.rbegin());
  for (std::uint32_t nr = 0; nr <= static_cast<std::uint32_t>(highest) + 64; ++nr) {
    numbers.insert(nr);
    numbers.insert(nr | kX32SyscallBit);
  }
  for (const int nr : decisions.named)
    numbers.insert(static_cast<std::uint32_t>(nr));
  for (const std::uint32_t nr :
       {kX32SyscallBit - 1, 0x7fffffffU, 0x80000000U, 0xfffffffeU, 0xffffffffU})
    numbers.insert(nr);
  const std::set<std::uint64_t> always = {0,          1,          2,           0x7fffffff,
                                          0x80000000, 0xffffffff, 0x100000000, ~std::uint64_t{0}};
  constexpr std::size_t kArchitecturesTried = 3;
  constexpr std::size_t kArguments = std::size(seccomp_data{}.args);
  std::size_t calls = numbers.size() * kArchitecturesTried;
  for (const auto& [nr, values] : decisions.argument_checked)
    calls += kArguments * (always.size() + values.size());
  if (calls > kMaxComparedCalls) return std::nullopt;

  auto same = [&](const seccomp_data& call) {
    const auto expected = run_program(reference, call);
    return expected && expected == run_program(candidate, call);
  };
  for (const std::uint32_t arch :
       {::seccomp_arch_native(), std::uint32_t{AUDIT_ARCH_I386}, std::uint32_t{0}}) {
    for (const std::uint32_t nr : numbers) {
      seccomp_data call{};
      call.arch = arch;
      call.nr = static_cast<int>(nr);
      if (!same(call)) return false;
    }
  }
  for (const auto& [nr, values] : decisions.argument_checked) {
    seccomp_data call{};
    call.arch = ::seccomp_arch_native();
    call.nr = nr;
    for (auto& arg : call.args) {
      for (const auto* pool : {&always, &values}) {
        for (const std::uint64_t value : *pool) {
          arg = value;
          if (!same(call)) return false;
        }
      }
      arg = 0;
    }
  }
  return true;
}

// The ranged layout (seccomp/ranges.h), or nullopt when the profile needs
// libseccomp's whole program: another machine than x86_64 or aarch64,
// several architectures, a number libseccomp alone knows what to do with,
// too many ranges or compared calls, or (never expected) a call the two
// programs would decide differently.
std::optional<std::vector<sock_filter>> ranged_layout(const Profile& profile,
                                                      std::uint32_t default_action,
                                                      KillActions kill_actions,
                                                      const std::vector<sock_filter>& whole) {
  // Architectures whose syscalls each have a number of their own (i386
  // and s390 multiplex socketcall and ipc, which number_decisions() does
  // not know), and profiles for this one alone.
  const std::uint32_t native = ::seccomp_arch_native();
  if ((native != SCMP_ARCH_X86_64 && native != SCMP_ARCH_AARCH64) ||
      !lists_only_the_native_architecture(profile)) {
    return std::nullopt;
  }
  const auto decisions = number_decisions(profile, default_action, kill_actions);
  if (!decisions) return std::nullopt;
  std::set<int> argument_checked;
  for (const auto& [nr, values] : decisions->argument_checked)
    argument_checked.insert(nr);
  auto remainder = libseccomp_program(profile, default_action, kill_actions, Layout::BinaryTree,
                                      &argument_checked);
  if (!remainder) return std::nullopt;
  auto program =
      ranged_program(number_intervals(*decisions, default_action), native, remainder.value());
  if (!program || program->size() >= whole.size()) return std::nullopt;
  if (decides_alike(whole, *program, *decisions) != true) return std::nullopt;
  return program;
}

}  // namespace

core::Result<std::shared_ptr<const CompiledFilter>> compile(const Profile& profile, Layout layout,
                                                            KillActions kill_actions) {
  const std::uint32_t default_action =
      scmp_action(profile.default_action, profile.default_errno, kill_actions);
  auto filter = std::make_shared<CompiledFilter>();
  filter->uses_listener = kill_actions == KillActions::Notify && needs_listener(profile);
  filter->load_flags = load_flags(profile.filter_flags);
  PB_TRY(whole, libseccomp_program(profile, default_action, kill_actions, layout, nullptr));
  filter->program = std::move(whole);
  if (layout == Layout::Ranges) {
    if (auto ranged = ranged_layout(profile, default_action, kill_actions, filter->program))
      filter->program = std::move(ranged).value();
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
