// config.json's top level, process and mounts (linux: spec_linux.cc).
#include "oci/spec/spec.h"

#include <sys/capability.h>
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "core/fs.h"
#include "core/json_parse.h"
#include "oci/spec/field_reader.h"
#include "oci/spec/spec_internal.h"
#include "oci/spec/spec_refusals.h"

namespace pulsebox::oci::spec {

using json = nlohmann::json;

namespace {

constexpr std::pair<std::string_view, int> kRlimits[] = {
    {"RLIMIT_AS", RLIMIT_AS},
    {"RLIMIT_CORE", RLIMIT_CORE},
    {"RLIMIT_CPU", RLIMIT_CPU},
    {"RLIMIT_DATA", RLIMIT_DATA},
    {"RLIMIT_FSIZE", RLIMIT_FSIZE},
    {"RLIMIT_LOCKS", RLIMIT_LOCKS},
    {"RLIMIT_MEMLOCK", RLIMIT_MEMLOCK},
    {"RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE},
    {"RLIMIT_NICE", RLIMIT_NICE},
    {"RLIMIT_NOFILE", RLIMIT_NOFILE},
    {"RLIMIT_NPROC", RLIMIT_NPROC},
    {"RLIMIT_RSS", RLIMIT_RSS},
    {"RLIMIT_RTPRIO", RLIMIT_RTPRIO},
    {"RLIMIT_RTTIME", RLIMIT_RTTIME},
    {"RLIMIT_SIGPENDING", RLIMIT_SIGPENDING},
    {"RLIMIT_STACK", RLIMIT_STACK},
};

// Mount flags and propagation, as in runtime-spec's features.md; any other
// option without a refusal row is filesystem data ("mode=755", "newinstance").
constexpr std::string_view kMountFlagOptions[] = {
    "async",
    "atime",
    "bind",
    "defaults",
    "dev",
    "diratime",
    "dirsync",
    "exec",
    "iversion",
    "lazytime",
    "loud",
    "mand",
    "noatime",
    "nodev",
    "nodiratime",
    "noexec",
    "noiversion",
    "nolazytime",
    "nomand",
    "norelatime",
    "nostrictatime",
    "nosuid",
    "nosymfollow",
    "private",
    "ratime",
    "rbind",
    "rdev",
    "rdiratime",
    "relatime",
    "remount",
    "rexec",
    "rnoatime",
    "rnodev",
    "rnodiratime",
    "rnoexec",
    "rnorelatime",
    "rnostrictatime",
    "rnosuid",
    "rnosymfollow",
    "ro",
    "rprivate",
    "rrelatime",
    "rro",
    "rrw",
    "rshared",
    "rslave",
    "rstrictatime",
    "rsuid",
    "rsymfollow",
    "runbindable",
    "rw",
    "shared",
    "silent",
    "slave",
    "strictatime",
    "suid",
    "symfollow",
    "sync",
    "tmpcopyup",
    "unbindable",
};

constexpr std::string_view kMountTypes[] = {"bind",   "tmpfs",  "proc",   "sysfs",
                                            "devpts", "mqueue", "cgroup", "cgroup2"};

const std::vector<std::string>& capability_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    const int count = static_cast<int>(::cap_max_bits());
    for (int cap = 0; cap < count && cap < 64; ++cap) {
      char* name = ::cap_to_name(static_cast<cap_value_t>(cap));
      std::string text = name == nullptr ? "" : name;
      ::cap_free(name);
      // libcap names a capability it does not know by its number.
      if (text.rfind("cap_", 0) != 0) break;
      std::transform(text.begin(), text.end(), text.begin(),
                     [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
      out.push_back(std::move(text));
    }
    return out;
  }();
  return names;
}

core::Result<std::uint64_t> capability_set(const ReadContext& ctx, FieldReader& reader,
                                           std::string_view key) {
  PB_TRY(names, reader.strings(key));
  std::uint64_t bits = 0;
  const auto& known = capability_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    auto it = std::find(known.begin(), known.end(), names[i]);
    if (it == known.end()) {
      const Refusal* row = find_refusal("process.capabilities.*[]=unknown");
      return refusal_error(
          *row, ctx.source,
          reader.child_path(key) + "[" + std::to_string(i) + "] \"" + names[i] + "\"");
    }
    bits |= std::uint64_t{1} << (it - known.begin());
  }
  return bits;
}

core::Result<Process> read_process(const ReadContext& ctx, const json& value, std::string path) {
  FieldReader reader(ctx, value, path, "process");
  PB_CHECK(reader.status());
  Process process;
  PB_TRY(terminal, reader.boolean("terminal"));
  process.terminal = terminal.value_or(false);
  if (const json* size = reader.take("consoleSize")) {
    FieldReader sub(ctx, *size, reader.child_path("consoleSize"), "process.consoleSize");
    PB_CHECK(sub.status());
    PB_TRY(height, sub.u64("height", UINT16_MAX));
    PB_TRY(width, sub.u64("width", UINT16_MAX));
    PB_CHECK(sub.finish());
    process.console_size =
        std::pair<std::uint16_t, std::uint16_t>(static_cast<std::uint16_t>(height.value_or(0)),
                                                static_cast<std::uint16_t>(width.value_or(0)));
  }
  const json* user = reader.take("user");
  if (user == nullptr) {
    return reader.error(reader.child_path("user"), "missing", "give process.user.uid and gid");
  }
  {
    FieldReader sub(ctx, *user, reader.child_path("user"), "process.user");
    PB_CHECK(sub.status());
    PB_TRY(uid, sub.u64("uid", UINT32_MAX));
    PB_TRY(gid, sub.u64("gid", UINT32_MAX));
    if (!uid || !gid) {
      return reader.error(sub.path(), "missing uid or gid", "give both uid and gid");
    }
    process.user.uid = static_cast<std::uint32_t>(*uid);
    process.user.gid = static_cast<std::uint32_t>(*gid);
    PB_TRY(umask, sub.u64("umask", 07777));
    if (umask) process.user.umask = static_cast<std::uint32_t>(*umask);
    const json* gids = sub.take("additionalGids");
    PB_CHECK(expect_array(ctx, gids, sub.child_path("additionalGids")));
    if (gids != nullptr) {
      for (std::size_t i = 0; i < gids->size(); ++i) {
        PB_TRY(id, as_u64(ctx, (*gids)[i],
                          sub.child_path("additionalGids") + "[" + std::to_string(i) + "]",
                          UINT32_MAX));
        process.user.additional_gids.push_back(static_cast<std::uint32_t>(id));
      }
    }
    PB_CHECK(sub.finish());
  }
  PB_TRY(args, reader.strings("args"));
  if (args.empty()) {
    return reader.error(reader.child_path("args"), "empty or missing: there is nothing to run",
                        "give the program and its arguments");
  }
  process.args = std::move(args);
  PB_TRY(env, reader.strings("env"));
  for (std::size_t i = 0; i < env.size(); ++i) {
    const auto equals = env[i].find('=');
    if (equals == std::string::npos || equals == 0) {
      return reader.error(reader.child_path("env") + "[" + std::to_string(i) + "]",
                          "\"" + env[i] + "\" is not KEY=value", "write it as KEY=value");
    }
  }
  process.env = std::move(env);
  PB_TRY(cwd, reader.string("cwd"));
  if (!cwd || cwd->empty() || cwd->front() != '/') {
    return reader.error(reader.child_path("cwd"),
                        cwd ? "\"" + *cwd + "\" is not an absolute path" : std::string("missing"),
                        "give an absolute path inside the container");
  }
  process.cwd = std::move(*cwd);
  if (const json* caps = reader.take("capabilities")) {
    FieldReader sub(ctx, *caps, reader.child_path("capabilities"), "process.capabilities");
    PB_CHECK(sub.status());
    PB_TRY(bounding, capability_set(ctx, sub, "bounding"));
    PB_TRY(effective, capability_set(ctx, sub, "effective"));
    PB_TRY(permitted, capability_set(ctx, sub, "permitted"));
    PB_TRY(inheritable, capability_set(ctx, sub, "inheritable"));
    PB_TRY(ambient, capability_set(ctx, sub, "ambient"));
    PB_CHECK(sub.finish());
    process.capabilities = {bounding, effective, permitted, inheritable, ambient};
  }
  if (const json* rlimits = reader.take("rlimits")) {
    PB_CHECK(expect_array(ctx, rlimits, reader.child_path("rlimits")));
    for (std::size_t i = 0; i < rlimits->size(); ++i) {
      FieldReader sub(ctx, (*rlimits)[i],
                      reader.child_path("rlimits") + "[" + std::to_string(i) + "]",
                      "process.rlimits[]");
      PB_CHECK(sub.status());
      PB_TRY(type, sub.string("type"));
      PB_TRY(soft, sub.u64("soft"));
      PB_TRY(hard, sub.u64("hard"));
      PB_CHECK(sub.finish());
      const auto* it = std::find_if(std::begin(kRlimits), std::end(kRlimits),
                                    [&](const auto& row) { return type && row.first == *type; });
      if (it == std::end(kRlimits)) {
        return reader.error(sub.child_path("type"),
                            type ? "unknown resource \"" + *type + "\"" : std::string("missing"),
                            "give an RLIMIT_* name of Linux (RLIMIT_NOFILE, ...)");
      }
      if (!soft || !hard) {
        return reader.error(sub.path(), "needs both soft and hard", "give both");
      }
      if (*soft > *hard) {
        return reader.error(sub.path(), "soft is above hard", "give soft <= hard");
      }
      for (const auto& earlier : process.rlimits) {
        if (earlier.resource == it->second) {
          return reader.error(sub.path(), "a second " + *type, "give each resource once");
        }
      }
      process.rlimits.push_back({it->second, *soft, *hard});
    }
  }
  PB_TRY(nnp, reader.boolean("noNewPrivileges"));
  process.no_new_privileges = nnp.value_or(false);
  if (const json* adj = reader.take("oomScoreAdj")) {
    PB_TRY(number, as_i64(ctx, *adj, reader.child_path("oomScoreAdj")));
    if (number < -1000 || number > 1000) {
      return reader.error(reader.child_path("oomScoreAdj"),
                          std::to_string(number) + " is outside -1000..1000",
                          "give a value from -1000 to 1000");
    }
    process.oom_score_adj = static_cast<int>(number);
  }
  PB_CHECK(reader.finish());
  return process;
}

core::Result<Mount> read_mount(const ReadContext& ctx, const json& value, std::size_t index) {
  const std::string path = "mounts[" + std::to_string(index) + "]";
  FieldReader reader(ctx, value, path, "mounts[]");
  PB_CHECK(reader.status());
  Mount mount;
  PB_TRY(destination, reader.string("destination"));
  if (!destination || destination->empty() || destination->front() != '/' ||
      has_dot_dot(*destination)) {
    return reader.error(reader.child_path("destination"),
                        destination
                            ? "\"" + *destination + "\" is not an absolute path without \"..\""
                            : std::string("missing"),
                        "give an absolute path inside the container");
  }
  mount.destination = std::move(*destination);
  PB_TRY(type, reader.string("type"));
  PB_TRY(source, reader.string("source"));
  mount.source = source.value_or("");
  PB_TRY(options, reader.strings("options"));
  for (std::size_t i = 0; i < options.size(); ++i) {
    if (const Refusal* row = find_refusal("mounts[].options[]=" + options[i])) {
      return refusal_error(
          *row, ctx.source,
          reader.child_path("options") + "[" + std::to_string(i) + "] \"" + options[i] + "\"");
    }
  }
  mount.options = std::move(options);
  const bool bind_option = std::any_of(mount.options.begin(), mount.options.end(),
                                       [](const auto& o) { return o == "bind" || o == "rbind"; });
  std::string kind = type.value_or("");
  if (kind.empty() || kind == "none") {
    if (!bind_option) {
      return reader.error(reader.child_path("type"),
                          "no type and no bind or rbind option: it is not a bind mount",
                          "give a type (tmpfs, proc, ...) or the bind option");
    }
    kind = "bind";
  } else if (std::find(std::begin(kMountTypes), std::end(kMountTypes), kind) ==
             std::end(kMountTypes)) {
    std::string list;
    for (auto name : kMountTypes)
      list += (list.empty() ? "" : ", ") + std::string(name);
    return core::Error(core::ErrorKind::kUnsupported, "oci",
                       ctx.source + ": " + reader.child_path("type") + ": not supported: \"" +
                           kind + "\" is not a filesystem pulsebox oci mounts; use one of " + list);
  }
  if (kind == "bind" && (mount.source.empty() || mount.source.front() != '/')) {
    return reader.error(reader.child_path("source"),
                        mount.source.empty() ? "missing for a bind mount"
                                             : "\"" + mount.source + "\" is not absolute",
                        "give the host path to bind as an absolute path");
  }
  mount.type = std::move(kind);
  PB_CHECK(reader.finish());
  return mount;
}

core::Result<std::map<std::string, std::string>> read_string_map(const ReadContext& ctx,
                                                                 const json* value,
                                                                 const std::string& path) {
  std::map<std::string, std::string> out;
  if (value == nullptr) return out;
  if (!value->is_object()) {
    return invalid(ctx, path, "expected an object of strings", "correct the value's type");
  }
  for (const auto& [key, item] : value->items()) {
    PB_TRY(text, as_string(ctx, item, path + "." + key));
    out.emplace(key, std::move(text));
  }
  return out;
}

core::Result<Hook> read_hook(const ReadContext& ctx, const json& value, std::string name) {
  FieldReader reader(ctx, value, name, "hooks.*[]");
  PB_CHECK(reader.status());
  Hook hook;
  PB_TRY(path, reader.string("path"));
  if (!path || path->empty() || path->front() != '/')
    return reader.error(name + ".path", "missing or not absolute",
                        "give the hook program's absolute path");
  hook.path = std::move(*path);
  PB_TRY(args, reader.strings("args"));
  hook.args = std::move(args);
  PB_TRY(env, reader.strings("env"));
  hook.env = std::move(env);
  if (const json* timeout = reader.take("timeout")) {
    if (!timeout->is_number_integer() || timeout->get<std::int64_t>() <= 0 ||
        timeout->get<std::int64_t>() > 24 * 3600)
      return reader.error(name + ".timeout", "expected whole seconds from 1 to 86400",
                          "give a positive number of seconds, or leave it out for 30");
    hook.timeout = timeout->get<int>();
  }
  PB_CHECK(reader.finish());
  hook.name = std::move(name);
  return hook;
}

core::Result<Hooks> read_hooks(const ReadContext& ctx, const json& value) {
  FieldReader reader(ctx, value, "hooks", "hooks");
  PB_CHECK(reader.status());
  Hooks hooks;
  const std::pair<const char*, std::vector<Hook>*> kKinds[] = {
      {"prestart", &hooks.create_runtime},
      {"createRuntime", &hooks.create_runtime},
      {"createContainer", &hooks.create_container},
      {"startContainer", &hooks.start_container},
      {"poststart", &hooks.poststart},
      {"poststop", &hooks.poststop},
  };
  for (const auto& [kind, list] : kKinds) {
    const std::string path = std::string("hooks.") + kind;
    const json* items = reader.take(kind);
    PB_CHECK(expect_array(ctx, items, path));
    if (items == nullptr) continue;
    for (std::size_t i = 0; i < items->size(); ++i) {
      PB_TRY(hook, read_hook(ctx, (*items)[i], path + "[" + std::to_string(i) + "]"));
      list->push_back(std::move(hook));
    }
  }
  PB_CHECK(reader.finish());
  return hooks;
}

// "1.0.2-dev" -> 1; anything else is not a version.
std::optional<int> major_version(const std::string& version) {
  std::size_t digits = 0;
  while (digits < version.size() && std::isdigit(static_cast<unsigned char>(version[digits])))
    ++digits;
  if (digits == 0 || digits > 4 || digits >= version.size() || version[digits] != '.') {
    return std::nullopt;
  }
  return std::stoi(version.substr(0, digits));
}

core::Result<Spec> read_document(const ReadContext& ctx, std::string_view text,
                                 const std::filesystem::path& bundle) {
  PB_TRY(root, core::parse_json(text, ctx.source));
  FieldReader reader(ctx, root, "", "");
  PB_CHECK(reader.status());
  Spec spec;
  PB_TRY(version, reader.string("ociVersion"));
  if (!version) return reader.error("ociVersion", "missing", "give the runtime-spec version");
  const auto major = major_version(*version);
  if (!major || *major != 1) {
    return core::Error(core::ErrorKind::kUnsupported, "oci",
                       ctx.source + ": ociVersion: not supported: \"" + *version +
                           "\" (pulsebox oci reads runtime-spec 1.x, up to " +
                           std::string(kOciVersionMax) + "); write a 1.x config");
  }
  spec.oci_version = std::move(*version);
  spec.bundle = std::filesystem::absolute(bundle).lexically_normal();
  if (const json* root_value = reader.take("root")) {
    FieldReader sub(ctx, *root_value, "root", "root");
    PB_CHECK(sub.status());
    PB_TRY(path, sub.string("path"));
    PB_TRY(readonly, sub.boolean("readonly"));
    PB_CHECK(sub.finish());
    if (!path || path->empty()) {
      return reader.error("root.path", "missing", "give the container's root filesystem");
    }
    spec.root_path = (spec.bundle / *path).lexically_normal();
    spec.root_readonly = readonly.value_or(false);
  } else {
    return reader.error("root", "missing", "give root.path, the container's root filesystem");
  }
  if (const json* process = reader.take("process")) {
    PB_TRY(parsed, read_process(ctx, *process, "process"));
    spec.process = std::move(parsed);
  } else {
    return reader.error("process", "missing: create needs the process to run",
                        "give process.args, cwd and user");
  }
  PB_TRY(hostname, reader.string("hostname"));
  spec.hostname = hostname.value_or("");
  PB_TRY(domainname, reader.string("domainname"));
  spec.domainname = domainname.value_or("");
  const json* mounts = reader.take("mounts");
  PB_CHECK(expect_array(ctx, mounts, "mounts"));
  if (mounts != nullptr) {
    for (std::size_t i = 0; i < mounts->size(); ++i) {
      PB_TRY(mount, read_mount(ctx, (*mounts)[i], i));
      spec.mounts.push_back(std::move(mount));
    }
  }
  if (const json* hooks = reader.take("hooks")) {
    PB_TRY(parsed, read_hooks(ctx, *hooks));
    spec.hooks = std::move(parsed);
  }
  PB_TRY(annotations, read_string_map(ctx, reader.take("annotations"), "annotations"));
  for (const auto& [key, value] : annotations) {
    if (key.rfind("org.pulsebox.", 0) == 0) {
      return reader.error("annotations." + key,
                          "the org.pulsebox. prefix is reserved for what pulsebox reports",
                          "remove it or use another prefix");
    }
  }
  spec.annotations = std::move(annotations);
  if (const json* linux_value = reader.take("linux")) {
    PB_TRY(linux_part, read_linux(ctx, *linux_value));
    spec.linux = std::move(linux_part);
  }
  PB_CHECK(reader.finish());
  PB_CHECK(check_cross_fields(ctx, spec));
  return spec;
}

}  // namespace

const Namespace* Spec::find_namespace(int clone_flag) const {
  for (const auto& ns : linux.namespaces) {
    if (ns.clone_flag == clone_flag) return &ns;
  }
  return nullptr;
}

core::Result<Spec> parse_spec(std::string_view text, const std::filesystem::path& bundle) {
  ReadContext ctx{"config.json"};
  try {
    return read_document(ctx, text, bundle);
  } catch (const json::exception& e) {
    return invalid(ctx, "", e.what(), "correct the config");
  }
}

core::Result<Spec> read_spec(const std::filesystem::path& bundle) {
  PB_TRY(text, core::read_regular_file(bundle / "config.json", kMaxConfigBytes, "config.json"));
  return parse_spec(text, bundle);
}

core::Result<Hooks> parse_hooks(const json& value, std::string_view source) {
  const ReadContext ctx{std::string(source)};
  return read_hooks(ctx, value);
}

core::Result<Process> parse_process(std::string_view text, std::string_view source) {
  ReadContext ctx{std::string(source)};
  try {
    PB_TRY(root, core::parse_json(text, source));
    return read_process(ctx, root, "");
  } catch (const json::exception& e) {
    return invalid(ctx, "", e.what(), "correct the process file");
  }
}

std::vector<std::string> supported_mount_options() {
  return {std::begin(kMountFlagOptions), std::end(kMountFlagOptions)};
}

std::vector<std::string> supported_mount_types() {
  return {std::begin(kMountTypes), std::end(kMountTypes)};
}

std::vector<std::string> known_capability_names() {
  return capability_names();
}

bool is_mount_flag_option(std::string_view option) {
  return std::find(std::begin(kMountFlagOptions), std::end(kMountFlagOptions), option) !=
         std::end(kMountFlagOptions);
}

}  // namespace pulsebox::oci::spec
