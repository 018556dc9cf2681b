// config.json -> the container process's plan (oci/plan_builder.h), as
// data, from the configs podman and containerd wrote here (data/oci/).
#include "oci/plan_builder.h"

#include <gtest/gtest.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace pulsebox::oci {
namespace {

using json = nlohmann::json;
using linux_api::MountOp;
using linux_api::MountStep;

json read_data(const std::string& name) {
  std::ifstream in(std::string(PULSEBOX_OCI_TEST_DATA) + "/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

spec::Spec parse(const json& config) {
  auto spec = spec::parse_spec(config.dump(), "/bundle");
  EXPECT_TRUE(spec.ok()) << spec.error().message();
  return spec.ok() ? std::move(spec).value() : spec::Spec{};
}

core::Result<launch::ContainerPlan> plan_of(const json& config, PlanInputs inputs = {}) {
  return build_container_plan(parse(config), inputs);
}

std::string plan_error_of(const json& config, PlanInputs inputs = {}) {
  auto plan = plan_of(config, inputs);
  return plan.ok() ? "(built)" : plan.error().message();
}

const MountStep* find_step(const launch::ContainerPlan& plan, const std::string& target,
                           MountOp op) {
  for (const auto& step : plan.mounts) {
    if (step.target == target && step.op == op) return &step;
  }
  return nullptr;
}

// podman's --read-only config without what is not built yet (tmpcopyup and
// the cgroup mount).
json podman_without_pending() {
  json config = read_data("podman-run-none-mem-pids-ro-v.config.json");
  json mounts = json::array();
  for (auto mount : config["mounts"]) {
    if (mount["type"] == "cgroup") continue;
    json options = json::array();
    for (const auto& option : mount["options"]) {
      if (option != "tmpcopyup") options.push_back(option);
    }
    mount["options"] = options;
    mounts.push_back(mount);
  }
  config["mounts"] = mounts;
  return config;
}

TEST(OciPlanBuilder, ContainerdConfig) {
  auto plan = plan_of(read_data("ctr-run-memory.config.json"));
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(plan->clone_namespaces, static_cast<std::uint64_t>(CLONE_NEWPID));
  EXPECT_EQ(plan->unshare_namespaces,
            static_cast<std::uint64_t>(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS));
  EXPECT_FALSE(plan->new_cgroup_namespace);
  EXPECT_EQ(plan->rootfs, "/bundle/rootfs");  // root.path "rootfs", relative to the bundle

  // The config's mounts in order, then the devices, then the /dev links.
  ASSERT_GE(plan->mounts.size(), 7u);
  EXPECT_EQ(plan->mounts[0].op, MountOp::Proc);
  EXPECT_EQ(plan->mounts[0].target, "/proc");
  const MountStep& dev = plan->mounts[1];
  EXPECT_EQ(dev.op, MountOp::Tmpfs);
  EXPECT_EQ(dev.target, "/dev");
  EXPECT_EQ(dev.flags, static_cast<unsigned long>(MS_NOSUID | MS_STRICTATIME));
  EXPECT_EQ(dev.data, "mode=755,size=65536k");
  const MountStep& pts = plan->mounts[2];
  EXPECT_EQ(pts.op, MountOp::Devpts);
  EXPECT_EQ(pts.data, "newinstance,ptmxmode=0666,mode=0620,gid=5");
  const MountStep* sys = find_step(*plan, "/sys", MountOp::Sysfs);
  ASSERT_NE(sys, nullptr);
  EXPECT_EQ(sys->flags, static_cast<unsigned long>(MS_NOSUID | MS_NOEXEC | MS_NODEV | MS_RDONLY));
  ASSERT_NE(find_step(*plan, "/dev/mqueue", MountOp::Mqueue), nullptr);
  const MountStep* shm = find_step(*plan, "/dev/shm", MountOp::Tmpfs);
  ASSERT_NE(shm, nullptr);
  EXPECT_EQ(shm->data, "mode=1777,size=65536k");

  // As real root the default devices are made with mknod.
  const MountStep* null = find_step(*plan, "/dev/null", MountOp::MakeDevice);
  ASSERT_NE(null, nullptr);
  EXPECT_EQ(null->mode, static_cast<unsigned>(S_IFCHR | 0666));
  EXPECT_EQ(null->device, makedev(1, 3));
  for (const char* path : {"/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"})
    EXPECT_NE(find_step(*plan, path, MountOp::MakeDevice), nullptr) << path;
  const MountStep* ptmx = find_step(*plan, "/dev/ptmx", MountOp::Symlink);
  ASSERT_NE(ptmx, nullptr);
  EXPECT_EQ(ptmx->source, "pts/ptmx");
  const MountStep* fd = find_step(*plan, "/dev/fd", MountOp::Symlink);
  ASSERT_NE(fd, nullptr);
  EXPECT_EQ(fd->source, "/proc/self/fd");
  // Devices come after the /dev tmpfs, or it would hide them.
  EXPECT_GT(null - plan->mounts.data(), 1);

  EXPECT_EQ(plan->masked_paths.size(), 10u);
  EXPECT_EQ(plan->readonly_paths.size(), 5u);
  EXPECT_TRUE(plan->no_new_privileges);
  EXPECT_EQ(plan->additional_gids, std::vector<gid_t>{0});
  EXPECT_TRUE(plan->set_groups);
  ASSERT_EQ(plan->rlimits.size(), 1u);
  EXPECT_EQ(plan->rlimits[0].resource, RLIMIT_NOFILE);
  EXPECT_EQ(plan->rlimits[0].soft, 1024u);
  // "echo" along the config's PATH, in order.
  ASSERT_FALSE(plan->exec_candidates.empty());
  EXPECT_EQ(plan->exec_candidates.front(), "/usr/local/sbin/echo");
  EXPECT_EQ(plan->exec_candidates.back(), "/bin/echo");
  EXPECT_EQ(plan->argv.size(), plan->args.size() + 1);
  EXPECT_EQ(plan->argv.back(), nullptr);
  EXPECT_GT(plan->last_capability, 30);
}

TEST(OciPlanBuilder, PodmanConfigWithoutPendingFeatures) {
  PlanInputs inputs;
  inputs.exec_fifo_fd = 10;
  inputs.exec_fifo_writer_fd = 11;
  inputs.cgroup_fd = 12;
  inputs.stdio[1] = 13;
  auto plan = plan_of(podman_without_pending(), inputs);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(plan->exec_fifo_fd, 10);
  EXPECT_EQ(plan->exec_fifo_writer_fd, 11);
  EXPECT_EQ(plan->cgroup_fd, 12);
  EXPECT_EQ(plan->stdio[1], 13);
  EXPECT_EQ(plan->console_socket_fd, -1);
  EXPECT_TRUE(plan->root_readonly);
  EXPECT_EQ(plan->hostname, "3093a5dac9cf");
  EXPECT_EQ(plan->umask, std::optional<mode_t>(18));
  EXPECT_FALSE(plan->no_new_privileges);
  // podman's seccomp profile, compiled with kernel kills.
  EXPECT_FALSE(plan->seccomp_program.empty());
  // 14 capabilities, CAP_CHOWN (0) among them, CAP_SYS_ADMIN (21) not.
  EXPECT_EQ(__builtin_popcountll(plan->capabilities.bounding), 14);
  EXPECT_NE(plan->capabilities.bounding & 1u, 0u);
  EXPECT_EQ(plan->capabilities.bounding & (1ull << 21), 0u);
  EXPECT_EQ(plan->capabilities.effective, plan->capabilities.bounding);

  const MountStep* data = find_step(*plan, "/data", MountOp::Bind);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->source, "/tmp/r23/rootfs/etc");
  EXPECT_TRUE(data->recursive);  // rbind
  EXPECT_EQ(data->flags, 0u);    // rw, rprivate
  EXPECT_EQ(data->propagation, static_cast<unsigned long>(MS_PRIVATE | MS_REC));
  const MountStep* hosts = find_step(*plan, "/etc/hosts", MountOp::Bind);
  ASSERT_NE(hosts, nullptr);
  EXPECT_FALSE(hosts->recursive);  // bind
  EXPECT_EQ(hosts->flags, static_cast<unsigned long>(MS_RDONLY | MS_NOSUID | MS_NOEXEC | MS_NODEV));
  const MountStep* tmp = find_step(*plan, "/tmp", MountOp::Tmpfs);
  ASSERT_NE(tmp, nullptr);
  EXPECT_EQ(tmp->flags, static_cast<unsigned long>(MS_NOSUID | MS_NODEV));
  EXPECT_EQ(tmp->data, "");
  ASSERT_EQ(plan->rlimits.size(), 2u);
  EXPECT_EQ(plan->rlimits[1].resource, RLIMIT_NPROC);
  EXPECT_EQ(plan->rlimits[1].hard, 32768u);
  EXPECT_EQ(plan->masked_paths.front(), "/proc/acpi");
}

TEST(OciPlanBuilder, TmpcopyupAttachesTheTreeCreateMade) {
  json config = read_data("podman-run-none-mem-pids-ro-v.config.json");
  config["mounts"].erase(config["mounts"].size() - 1);  // the cgroup mount
  // /tmp, /run and /var/tmp carry tmpcopyup: without their trees, nothing.
  EXPECT_EQ(plan_error_of(config),
            "config.json: mounts[1] (/tmp): no tmpcopyup tree was made for it");
  PlanInputs inputs;
  inputs.copy_up_fds = {{1, 21}, {3, 22}, {8, 23}};
  auto plan = plan_of(config, inputs);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  const MountStep* tmp = find_step(*plan, "/tmp", MountOp::AttachFd);
  ASSERT_NE(tmp, nullptr);
  EXPECT_EQ(tmp->fd, 21);
  EXPECT_EQ(find_step(*plan, "/tmp", MountOp::Tmpfs), nullptr);
  const MountStep* var_tmp = find_step(*plan, "/var/tmp", MountOp::AttachFd);
  ASSERT_NE(var_tmp, nullptr);
  EXPECT_EQ(var_tmp->fd, 23);
  EXPECT_EQ(copy_up_mounts(parse(config)), (std::vector<std::size_t>{1, 3, 8}));
  auto flags = mount_flags_and_data(parse(config), 1);
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(flags->first, static_cast<unsigned long>(MS_NOSUID | MS_NODEV));

  // In a user namespace too (create makes the trees: tmpcopyup.h).
  config["linux"]["namespaces"].push_back({{"type", "user"}});
  config["linux"]["uidMappings"] = {{{"containerID", 0}, {"hostID", 1000}, {"size", 1}}};
  config["linux"]["gidMappings"] = {{{"containerID", 0}, {"hostID", 1000}, {"size", 1}}};
  inputs.can_mknod = false;
  auto in_user_namespace = build_container_plan(parse(config), inputs);
  ASSERT_TRUE(in_user_namespace.ok()) << in_user_namespace.error().message();
  EXPECT_NE(find_step(*in_user_namespace, "/tmp", MountOp::AttachFd), nullptr);
}

TEST(OciPlanBuilder, CgroupMountNeedsTheContainersCgroup) {
  // A cgroup mount needs the container's own cgroup (an ordinary user's
  // container without limits has none).
  json with_cgroup = podman_without_pending();
  with_cgroup["mounts"].push_back(
      {{"destination", "/sys/fs/cgroup"}, {"type", "cgroup"}, {"source", "cgroup"}});
  EXPECT_NE(plan_error_of(with_cgroup).find("mounts[12] (/sys/fs/cgroup): not supported yet"),
            std::string::npos)
      << plan_error_of(with_cgroup);
}

TEST(OciPlanBuilder, CgroupMountShowsOnlyTheContainersLeaves) {
  json config = read_data("podman-run-none-mem-pids-ro-v.config.json");
  for (auto& mount : config["mounts"]) {
    json options = json::array();
    for (const auto& option : mount["options"]) {
      if (option != "tmpcopyup") options.push_back(option);
    }
    mount["options"] = options;
  }
  PlanInputs hybrid;
  hybrid.cgroup_views = {{"unified", "/sys/fs/cgroup/unified/libpod_parent/libpod-x"},
                         {"memory", "/sys/fs/cgroup/memory/libpod_parent/libpod-x"}};
  auto plan = plan_of(config, hybrid);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  const MountStep* tmpfs = find_step(*plan, "/sys/fs/cgroup", MountOp::Tmpfs);
  ASSERT_NE(tmpfs, nullptr);
  EXPECT_EQ(tmpfs->flags & MS_RDONLY, 0u);  // made read-only after the binds
  const MountStep* memory = find_step(*plan, "/sys/fs/cgroup/memory", MountOp::Bind);
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(memory->source, "/sys/fs/cgroup/memory/libpod_parent/libpod-x");
  EXPECT_FALSE(memory->recursive);
  EXPECT_EQ(memory->flags,
            static_cast<unsigned long>(MS_RDONLY | MS_NOSUID | MS_NOEXEC | MS_NODEV));
  ASSERT_NE(find_step(*plan, "/sys/fs/cgroup/unified", MountOp::Bind), nullptr);
  EXPECT_NE(find_step(*plan, "/sys/fs/cgroup", MountOp::ReadOnly), nullptr);

  PlanInputs v2;
  v2.cgroup_views = {{"", "/sys/fs/cgroup/libpod_parent/libpod-x"}};
  plan = plan_of(config, v2);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(find_step(*plan, "/sys/fs/cgroup", MountOp::Tmpfs), nullptr);
  const MountStep* leaf = find_step(*plan, "/sys/fs/cgroup", MountOp::Bind);
  ASSERT_NE(leaf, nullptr);
  EXPECT_EQ(leaf->source, "/sys/fs/cgroup/libpod_parent/libpod-x");
}

// linux.namespaces[i].path: the descriptor create opened, in the joining
// order (user, ipc, uts, net, pid, mnt, cgroup), and no new namespace of
// those types.
TEST(OciPlanBuilder, JoinedNamespaces) {
  json config = read_data("ctr-run-memory.config.json");
  config["linux"]["namespaces"][4]["path"] = "/run/netns/x";  // network
  config["linux"]["namespaces"][1]["path"] = "/proc/9/ns/ipc";
  PlanInputs inputs;
  inputs.namespace_fds = {{4, 40}, {1, 41}};
  auto plan = plan_of(config, inputs);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  ASSERT_EQ(plan->join_namespaces.size(), 2U);
  EXPECT_EQ(plan->join_namespaces[0].type, CLONE_NEWIPC);
  EXPECT_EQ(plan->join_namespaces[0].fd, 41);
  EXPECT_EQ(plan->join_namespaces[1].type, CLONE_NEWNET);
  EXPECT_EQ(plan->join_namespaces[1].fd, 40);
  EXPECT_EQ(plan->unshare_namespaces, static_cast<std::uint64_t>(CLONE_NEWNS | CLONE_NEWUTS));
  EXPECT_EQ(plan->clone_namespaces, static_cast<std::uint64_t>(CLONE_NEWPID));
}

TEST(OciPlanBuilder, Refusals) {
  json config = read_data("ctr-run-memory.config.json");
  // A joined mount namespace would take the container's mounts.
  json joined_mount = config;
  joined_mount["linux"]["namespaces"][3]["path"] = "/proc/1/ns/mnt";
  EXPECT_NE(plan_error_of(joined_mount).find("linux.namespaces[3].path: not supported yet"),
            std::string::npos)
      << plan_error_of(joined_mount);
  json joined_with_new_user = config;
  joined_with_new_user["linux"]["namespaces"][4]["path"] = "/run/netns/x";
  joined_with_new_user["linux"]["namespaces"].push_back({{"type", "user"}});
  joined_with_new_user["linux"]["uidMappings"] = {
      {{"containerID", 0}, {"hostID", 1000}, {"size", 1}}};
  joined_with_new_user["linux"]["gidMappings"] = {
      {{"containerID", 0}, {"hostID", 1000}, {"size", 1}}};
  joined_with_new_user["process"]["user"].erase("additionalGids");
  EXPECT_NE(
      plan_error_of(joined_with_new_user).find("a new user namespace together with a namespace"),
      std::string::npos)
      << plan_error_of(joined_with_new_user);

  json no_mount = config;
  no_mount["linux"]["namespaces"].erase(3);
  EXPECT_NE(plan_error_of(no_mount).find("needs a mount namespace"), std::string::npos)
      << plan_error_of(no_mount);

  json terminal = config;
  terminal["process"]["terminal"] = true;
  EXPECT_EQ(plan_error_of(terminal),
            "config.json: process.terminal is true: give --console-socket");
  PlanInputs console;
  console.console_socket_fd = 20;
  EXPECT_EQ(plan_error_of(terminal, console), "(built)");
  EXPECT_NE(plan_error_of(config, console).find("--console-socket"), std::string::npos);

  json relative_path = config;
  relative_path["process"]["env"] = {"PATH=bin:usr/bin"};
  EXPECT_NE(plan_error_of(relative_path).find("process.args[0] \"echo\": not found on the PATH"),
            std::string::npos)
      << plan_error_of(relative_path);

  json shared = config;
  shared["mounts"][1]["options"].push_back("rshared");
  EXPECT_NE(plan_error_of(shared).find("mounts[1] (/dev).options \"rshared\": not supported yet"),
            std::string::npos)
      << plan_error_of(shared);
  EXPECT_NE(plan_error_of(shared).find("never lets the container's mounts propagate back"),
            std::string::npos);

  json proc_ro = config;
  proc_ro["mounts"][0]["options"].push_back("ro");
  EXPECT_NE(plan_error_of(proc_ro).find("mounts[0] (/proc).options"), std::string::npos);
}

// Propagation: on binds as the option says (after they are attached), on
// the root after pivot_root; a new filesystem is private already; shared is
// refused with why.
TEST(OciPlanBuilder, Propagation) {
  json config = read_data("ctr-run-memory.config.json");
  const auto bind_with = [&](const json& options) {
    json changed = config;
    changed["mounts"].push_back(
        {{"destination", "/vol"}, {"type", "bind"}, {"source", "/srv"}, {"options", options}});
    return changed;
  };
  auto plan = plan_of(bind_with({"rbind", "rslave"}));
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(find_step(*plan, "/vol", MountOp::Bind)->propagation,
            static_cast<unsigned long>(MS_SLAVE | MS_REC));
  EXPECT_EQ(plan->root_propagation, 0u);  // stays rslave
  plan = plan_of(bind_with({"bind", "private"}));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(find_step(*plan, "/vol", MountOp::Bind)->propagation,
            static_cast<unsigned long>(MS_PRIVATE));
  plan = plan_of(bind_with({"rbind", "runbindable"}));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(find_step(*plan, "/vol", MountOp::Bind)->propagation,
            static_cast<unsigned long>(MS_UNBINDABLE | MS_REC));
  plan = plan_of(bind_with({"rbind"}));
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(find_step(*plan, "/vol", MountOp::Bind)->propagation, 0u);  // runc: the clone's
  EXPECT_NE(plan_error_of(bind_with({"rbind", "shared"})).find("/vol).options \"shared\""),
            std::string::npos);

  json tmpfs = config;
  tmpfs["mounts"][1]["options"].push_back("rprivate");
  EXPECT_EQ(plan_error_of(tmpfs), "(built)");
  tmpfs["mounts"][1]["options"].push_back("unbindable");
  EXPECT_NE(plan_error_of(tmpfs).find("unbindable is applied to bind mounts only"),
            std::string::npos);

  for (const auto& [name, flags] : std::vector<std::pair<std::string, unsigned long>>{
           {"slave", MS_SLAVE},
           {"rslave", MS_SLAVE | MS_REC},
           {"private", MS_PRIVATE},
           {"rprivate", MS_PRIVATE | MS_REC},
           {"runbindable", MS_UNBINDABLE | MS_REC}}) {
    json root = config;
    root["linux"]["rootfsPropagation"] = name;
    plan = plan_of(root);
    ASSERT_TRUE(plan.ok()) << name << ": " << plan.error().message();
    EXPECT_EQ(plan->root_propagation, flags) << name;
  }
  json shared_root = config;
  shared_root["linux"]["rootfsPropagation"] = "shared";
  EXPECT_NE(
      plan_error_of(shared_root).find("linux.rootfsPropagation \"shared\": not supported yet"),
      std::string::npos)
      << plan_error_of(shared_root);
}

// linux.seccomp.flags reach seccomp(2) through the plan, for create and exec.
TEST(OciPlanBuilder, SeccompFlags) {
  json config = read_data("ctr-run-memory.config.json");
  config["linux"]["seccomp"] = {
      {"defaultAction", "SCMP_ACT_ALLOW"},
      {"architectures", {"SCMP_ARCH_X86_64"}},
      {"flags", {"SECCOMP_FILTER_FLAG_SPEC_ALLOW", "SECCOMP_FILTER_FLAG_LOG"}}};
  auto plan = plan_of(config);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(plan->seccomp_flags,
            static_cast<unsigned>(SECCOMP_FILTER_FLAG_SPEC_ALLOW | SECCOMP_FILTER_FLAG_LOG));
  const spec::Spec spec = parse(config);
  auto exec = build_exec_plan(spec, *spec.process, {});
  ASSERT_TRUE(exec.ok()) << exec.error().message();
  EXPECT_EQ(exec->seccomp_flags, plan->seccomp_flags);
  config["linux"]["seccomp"]["flags"] = {"SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"};
  const auto refused = spec::parse_spec(config.dump(), "/bundle");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("linux.seccomp.flags[0]"), std::string::npos)
      << refused.error().message();
}

TEST(OciPlanBuilder, UserNamespaceBindsDevicesAndMapsIds) {
  json config = read_data("ctr-run-memory.config.json");
  config["linux"]["namespaces"].push_back({{"type", "user"}});
  config["linux"]["uidMappings"] = {{{"containerID", 0}, {"hostID", 1000}, {"size", 1}}};
  config["linux"]["gidMappings"] = {{{"containerID", 0}, {"hostID", 1000}, {"size", 1}}};
  config["process"]["user"].erase("additionalGids");
  auto plan = plan_of(config);
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  EXPECT_EQ(plan->clone_namespaces, static_cast<std::uint64_t>(CLONE_NEWPID | CLONE_NEWUSER));
  ASSERT_EQ(plan->id_maps.uids.size(), 1u);
  EXPECT_EQ(plan->id_maps.uids[0].outside, 1000u);
  EXPECT_FALSE(plan->set_groups);  // one gid mapped: setgroups is denied
  // mknod is refused in a user namespace: the host's nodes are bound.
  EXPECT_EQ(find_step(*plan, "/dev/null", MountOp::MakeDevice), nullptr);
  const MountStep* null = find_step(*plan, "/dev/null", MountOp::Bind);
  ASSERT_NE(null, nullptr);
  EXPECT_EQ(null->source, "/dev/null");
  EXPECT_FALSE(null->recursive);
}

TEST(OciPlanBuilder, ListedDevicesAndRules) {
  json config = read_data("ctr-run-memory.config.json");
  config["linux"]["devices"] = {{{"path", "/dev/fuse"},
                                 {"type", "c"},
                                 {"major", 10},
                                 {"minor", 229},
                                 {"fileMode", 0600},
                                 {"uid", 0},
                                 {"gid", 0}}};
  const spec::Spec spec = parse(config);
  auto plan = build_container_plan(spec, {});
  ASSERT_TRUE(plan.ok()) << plan.error().message();
  const MountStep* fuse = find_step(*plan, "/dev/fuse", MountOp::MakeDevice);
  ASSERT_NE(fuse, nullptr);
  EXPECT_EQ(fuse->mode, static_cast<unsigned>(S_IFCHR | 0600));
  EXPECT_EQ(fuse->device, makedev(10, 229));
  EXPECT_EQ(fuse->uid, 0);

  // In a user namespace a device the host lacks (these numbers) is refused.
  config["linux"]["devices"][0]["minor"] = 250;
  config["linux"]["devices"][0]["path"] = "/dev/pulsebox-no-such-device";
  PlanInputs no_mknod;
  no_mknod.can_mknod = false;
  EXPECT_NE(plan_error_of(config, no_mknod)
                .find("linux.devices[0]: /dev/pulsebox-no-such-device: no host device"),
            std::string::npos)
      << plan_error_of(config, no_mknod);

  // The config's rules first (podman: deny all), then runc's implicit allows.
  const auto rules = device_rules(spec);
  ASSERT_GT(rules.size(), spec.linux.resources.devices.size());
  EXPECT_FALSE(rules.front().allow);
  EXPECT_EQ(rules.front().type, 'a');
  const spec::DeviceRule& last = rules.back();
  EXPECT_TRUE(last.allow);
  EXPECT_EQ(last.major, 10);
  EXPECT_EQ(last.minor, 229);
  EXPECT_EQ(last.access, "rwm");
}

TEST(OciPlanBuilder, CgroupResources) {
  const spec::Spec podman = parse(podman_without_pending());
  auto limits = cgroup_resources(podman.linux.resources);
  ASSERT_TRUE(limits.ok()) << limits.error().message();
  EXPECT_EQ(limits->memory_limit, 33554432);
  EXPECT_EQ(limits->memory_swap, 67108864);
  EXPECT_EQ(limits->pids_limit, 16);
  EXPECT_FALSE(limits->cpu_shares);

  const spec::Spec ctr = parse(read_data("ctr-run-memory.config.json"));
  limits = cgroup_resources(ctr.linux.resources);
  ASSERT_TRUE(limits.ok());
  EXPECT_EQ(limits->cpu_shares, 1024u);

  spec::Resources more;
  more.memory = spec::MemoryResources{};
  more.memory->swappiness = 10;
  more.memory->disable_oom_killer = true;
  more.cpu = spec::CpuResources{};
  more.cpu->cpus = "0";
  more.cpu->idle = 1;
  more.block_io = spec::BlockIoResources{};
  more.block_io->weight = 500;
  spec::BlockIoDevice leaf_only;
  leaf_only.major = 8;
  leaf_only.leaf_weight = 300;
  more.block_io->weight_device.push_back(leaf_only);
  more.hugepage_limits.push_back({"2MB", 4 << 20});
  more.unified["memory.high"] = "1000000";
  auto mapped = cgroup_resources(more);
  ASSERT_TRUE(mapped.ok()) << mapped.error().message();
  EXPECT_EQ(mapped->memory_swappiness, 10u);
  EXPECT_TRUE(mapped->disable_oom_killer);
  EXPECT_EQ(mapped->cpuset_cpus, "0");
  EXPECT_EQ(mapped->cpu_idle, 1);
  ASSERT_TRUE(mapped->block_io);
  EXPECT_EQ(mapped->block_io->weight, 500);
  // Index for index with weightDevice, so that errors name the right entry.
  ASSERT_EQ(mapped->block_io->weight_device.size(), 1u);
  EXPECT_EQ(mapped->block_io->weight_device[0].value, 0u);
  EXPECT_EQ(mapped->block_io->leaf_weight_device[0].value, 300u);
  EXPECT_EQ(mapped->hugepage_limits.at(0).page_size, "2MB");
  EXPECT_EQ(mapped->unified.at("memory.high"), "1000000");

  spec::Resources hierarchy;
  hierarchy.memory = spec::MemoryResources{};
  hierarchy.memory->use_hierarchy = true;
  auto refused = cgroup_resources(hierarchy);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message().find("linux.resources.memory"), std::string::npos);
}

}  // namespace
}  // namespace pulsebox::oci
