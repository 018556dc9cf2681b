// An OCI runtime-spec 1.2.1 bundle's config.json, read into plain data.
//
//   PB_TRY(spec, oci::spec::read_spec("/path/to/bundle"));
//   spec.root_path;                 // absolute (a relative root.path is under the bundle)
//   spec.process->args;             // always present and non-empty after read_spec
//   spec.linux.namespaces;          // one entry per type, clone flag + optional path
//   PB_TRY(process, oci::spec::parse_process(text, "/tmp/runc-process1"));  // exec --process
//
// The reader is strict, because whatever it let through unread would be a
// promise the runtime silently breaks: every key must be one it consumed,
// else the config is refused naming the key's JSON path; a supported field
// with a value pulsebox cannot honour is refused too (spec_refusals.h holds
// the table of refused paths, shared with `features` and docs/oci.md).
// Errors are kInvalidInput (malformed) or kUnsupported (refused), stage
// "oci", and read
//   "config.json: linux.resources.rdma: not supported: pulsebox does not manage the RDMA
//    controller; remove it from the config"
// Nothing here touches the system beyond reading config.json and asking
// libcap and the kernel which capabilities exist.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "linux/caps.h"
#include "linux/userns.h"
#include "seccomp/profile.h"

namespace pulsebox::oci::spec {

// The runtime-spec version this reader implements, and the oldest it reads.
inline constexpr std::string_view kOciVersionMax = "1.2.1";
inline constexpr std::string_view kOciVersionMin = "1.0.0";

// Bit n is capability n (CAP_CHOWN = bit 0); the launcher's own type, so
// the sets reach the container's process without a translation.
using CapabilitySets = linux_api::CapabilitySets;

struct User {
  std::uint32_t uid = 0, gid = 0;
  std::optional<std::uint32_t> umask;
  std::vector<std::uint32_t> additional_gids;
};

struct Rlimit {
  int resource = 0;  // RLIMIT_*
  std::uint64_t soft = 0, hard = 0;
};

struct Process {
  bool terminal = false;
  std::optional<std::pair<std::uint16_t, std::uint16_t>> console_size;  // height, width
  User user;
  std::vector<std::string> args, env;  // env entries are KEY=value
  std::string cwd;                     // absolute
  CapabilitySets capabilities;
  std::vector<Rlimit> rlimits;
  bool no_new_privileges = false;
  std::optional<int> oom_score_adj;
};

// `options` as written; flags, propagation and filesystem data are told
// apart by the mount plan (is_mount_flag_option() below names the flags).
struct Mount {
  std::string destination, type, source;
  std::vector<std::string> options;
};

// One hook (runtime-spec config.md "POSIX-platform Hooks"). `path` is
// absolute; `args` is the whole argv (args[0] included) and `env` the whole
// environment; `name` is its place in config.json ("hooks.prestart[1]"),
// for errors.
struct Hook {
  std::string name;
  std::string path;
  std::vector<std::string> args, env;
  std::optional<int> timeout;  // seconds, > 0; none: the runtime's default
};
// The deprecated prestart hooks come first in create_runtime: runc runs
// them at the same point, just before createRuntime's own.
struct Hooks {
  std::vector<Hook> create_runtime, create_container, start_container, poststart, poststop;
};

struct Namespace {
  int clone_flag = 0;  // CLONE_NEWPID, ...
  std::string path;    // empty: a new one
};

struct Device {
  char type = 'c';  // c, b, u or p
  std::string path;
  std::int64_t major = 0, minor = 0;
  std::optional<std::uint32_t> file_mode, uid, gid;
};

struct DeviceRule {
  bool allow = false;
  char type = 'a';                      // a, c or b
  std::int64_t major = -1, minor = -1;  // -1: any
  std::string access = "rwm";
};

// runc's conventions: an absent value is "leave as is"; -1 is unlimited.
struct MemoryResources {
  std::optional<std::int64_t> limit, reservation, swap;  // swap: memory + swap
  std::optional<std::uint64_t> swappiness;
  std::optional<bool> disable_oom_killer, use_hierarchy, check_before_update;
};

struct CpuResources {
  std::optional<std::uint64_t> shares, period, burst;
  std::optional<std::int64_t> quota, idle;
  std::string cpus, mems;  // empty: not set
};

struct BlockIoDevice {
  std::int64_t major = 0, minor = 0;
  std::optional<std::uint16_t> weight, leaf_weight;  // weightDevice
  std::uint64_t rate = 0;                            // throttle*Device
};

struct BlockIoResources {
  std::optional<std::uint16_t> weight, leaf_weight;
  std::vector<BlockIoDevice> weight_device, throttle_read_bps, throttle_write_bps,
      throttle_read_iops, throttle_write_iops;
};

struct HugepageLimit {
  std::string page_size;  // "2MB"
  std::uint64_t limit = 0;
};

struct Resources {
  std::optional<MemoryResources> memory;
  std::optional<std::int64_t> pids_limit;
  std::optional<CpuResources> cpu;
  std::optional<BlockIoResources> block_io;
  std::vector<HugepageLimit> hugepage_limits;
  std::map<std::string, std::string> unified;
  std::vector<DeviceRule> devices;  // in order; the runtime appends its implicit allows
};

struct Linux {
  std::vector<Namespace> namespaces;
  linux_api::IdMaps id_maps;  // deny_setgroups when only one gid is mapped
  // Keys in sysctl(8)'s dotted form: '.' separates, '/' is a dot inside a
  // name ("net.ipv4.conf.eth0/100.forwarding").
  std::map<std::string, std::string> sysctl;
  Resources resources;
  std::string cgroups_path;
  std::vector<Device> devices;
  std::optional<seccomp::Profile> seccomp;  // kill actions are the kernel's (no supervisor)
  std::string rootfs_propagation;           // empty: runc's rslave
  std::vector<std::string> masked_paths, readonly_paths;
  std::optional<unsigned long> personality;  // PER_LINUX or PER_LINUX32
};

struct Spec {
  std::string oci_version;
  std::filesystem::path bundle, root_path;  // absolute
  bool root_readonly = false;
  std::optional<Process> process;
  std::string hostname, domainname;
  std::vector<Mount> mounts;
  Hooks hooks;
  std::map<std::string, std::string> annotations;
  Linux linux;

  // The namespace of `clone_flag` listed in linux.namespaces, if any.
  const Namespace* find_namespace(int clone_flag) const;
};

// config.json is read whole, so it is bounded (podman's are about 10 KB).
inline constexpr std::uint64_t kMaxConfigBytes = 4ull << 20;

// Reads <bundle>/config.json (a regular file, at most kMaxConfigBytes).
core::Result<Spec> read_spec(const std::filesystem::path& bundle);
// `bundle` anchors a relative root.path; it is made absolute.
core::Result<Spec> parse_spec(std::string_view text, const std::filesystem::path& bundle);
// A process object alone (`exec --process F`); `source` names it in errors.
core::Result<Process> parse_process(std::string_view text, std::string_view source);
// A `hooks` object as config.json has it (state.json keeps the runtime's
// own hooks this way); `source` names it in errors.
core::Result<Hooks> parse_hooks(const nlohmann::json& value, std::string_view source);

// The tables the reader accepts, for `features`.
std::vector<std::string> supported_mount_options();  // flags and propagation
std::vector<std::string> supported_mount_types();
std::vector<std::string> supported_namespace_types();
// A CLONE_NEW* flag's name in config.json ("network"), "?" for another value.
std::string_view namespace_name(int flag);
// The namespace (a CLONE_NEW* flag) a linux.sysctl key, in its dotted form,
// is written in; 0 for a key no namespace holds (it would change the host's).
int sysctl_namespace(std::string_view key);
// A propagation option's flags (MS_PRIVATE, MS_SLAVE, MS_UNBINDABLE or
// MS_SHARED, with MS_REC for the r- forms); nullopt for another option.
std::optional<unsigned long> propagation_flags(std::string_view option);
std::vector<std::string> known_capability_names();  // CAP_*, up to this kernel's last
bool is_mount_flag_option(std::string_view option);

}  // namespace pulsebox::oci::spec
