// OCI hooks: what the reader takes from config.json's `hooks`, the state a
// hook reads on stdin, and how the runtime runs one (oci/hooks.h): exactly
// its args and env, a failure named with its status and stderr, a timeout
// that kills its whole process group. No privileges needed.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <thread>

#include "helpers/test_support.h"
#include "oci/hooks.h"
#include "oci/plan_builder.h"
#include "oci/spec/spec.h"

namespace pulsebox::oci {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

core::Result<spec::Spec> parse_with_hooks(const json& hooks) {
  json config = json::parse(R"({
    "ociVersion": "1.2.1",
    "root": {"path": "rootfs"},
    "process": {"user": {"uid": 0, "gid": 0}, "args": ["sh"], "cwd": "/"},
    "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}]}
  })");
  config["hooks"] = hooks;
  return spec::parse_spec(config.dump(), "/bundle");
}

std::string hooks_error_of(const json& hooks) {
  auto parsed = parse_with_hooks(hooks);
  return parsed.ok() ? "(parsed)" : parsed.error().message();
}

spec::Hook shell_hook(const std::string& script, std::vector<std::string> env = {},
                      std::optional<int> timeout = std::nullopt) {
  spec::Hook hook;
  hook.name = "hooks.createRuntime[0]";
  hook.path = "/bin/sh";
  hook.args = {"sh", "-c", script};
  hook.env = std::move(env);
  hook.timeout = timeout;
  return hook;
}

TEST(OciHooksReader, EveryKindIsReadPrestartBeforeCreateRuntime) {
  auto parsed = parse_with_hooks(json::parse(R"({
    "createRuntime": [{"path": "/bin/b", "args": ["b", "1"], "env": ["X=1"], "timeout": 5}],
    "prestart": [{"path": "/bin/a"}],
    "createContainer": [{"path": "/bin/c"}],
    "startContainer": [{"path": "/bin/d"}],
    "poststart": [{"path": "/bin/e"}],
    "poststop": [{"path": "/bin/f"}, {"path": "/bin/g"}]
  })"));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message();
  const auto& hooks = parsed->hooks;
  ASSERT_EQ(hooks.create_runtime.size(), 2u);
  EXPECT_EQ(hooks.create_runtime[0].path, "/bin/a");
  EXPECT_EQ(hooks.create_runtime[0].name, "hooks.prestart[0]");
  EXPECT_EQ(hooks.create_runtime[1].name, "hooks.createRuntime[0]");
  EXPECT_EQ(hooks.create_runtime[1].args, (std::vector<std::string>{"b", "1"}));
  EXPECT_EQ(hooks.create_runtime[1].env, (std::vector<std::string>{"X=1"}));
  EXPECT_EQ(hooks.create_runtime[1].timeout, 5);
  EXPECT_EQ(hooks.create_container.at(0).path, "/bin/c");
  EXPECT_EQ(hooks.start_container.at(0).path, "/bin/d");
  EXPECT_EQ(hooks.poststart.at(0).path, "/bin/e");
  EXPECT_EQ(hooks.poststop.at(1).name, "hooks.poststop[1]");
}

TEST(OciHooksReader, BadHooksAreRefusedByPath) {
  EXPECT_NE(hooks_error_of(json::parse(R"({"poststop": [{"path": "bin/x"}]})"))
                .find("hooks.poststop[0].path: missing or not absolute"),
            std::string::npos);
  EXPECT_NE(hooks_error_of(json::parse(R"({"poststart": [{"args": ["x"]}]})"))
                .find("hooks.poststart[0].path"),
            std::string::npos);
  EXPECT_NE(hooks_error_of(json::parse(R"({"createRuntime": [{"path": "/x", "timeout": 0}]})"))
                .find("hooks.createRuntime[0].timeout"),
            std::string::npos);
  EXPECT_NE(hooks_error_of(json::parse(R"({"createRuntime": [{"path": "/x", "dir": "/"}]})"))
                .find("hooks.createRuntime[0].dir: unknown key"),
            std::string::npos);
  EXPECT_NE(hooks_error_of(json::parse(R"({"preStart": []})")).find("hooks.preStart: unknown key"),
            std::string::npos);
  EXPECT_NE(hooks_error_of(json::parse(R"({"poststop": {}})")).find("hooks.poststop"),
            std::string::npos);
}

TEST(OciHooksState, TheStateDocumentHasRuntimeSpecsFields) {
  const auto text = hook_state_json({"c1", "creating", 42, "/b", {{"a", "b"}}});
  const auto state = json::parse(text);
  EXPECT_EQ(state["ociVersion"], "1.2.1");
  EXPECT_EQ(state["id"], "c1");
  EXPECT_EQ(state["status"], "creating");
  EXPECT_EQ(state["pid"], 42);
  EXPECT_EQ(state["bundle"], "/b");
  EXPECT_EQ(state["annotations"]["a"], "b");
  EXPECT_FALSE(json::parse(hook_state_json({"c1", "stopped", 0, "/b", {}})).contains("pid"));
}

TEST(OciHooksState, RuntimeHooksRoundTripThroughTheRecord) {
  spec::Hooks hooks;
  hooks.create_runtime.push_back(shell_hook("exit 0"));  // not the record's
  spec::Hook post;
  post.path = "/bin/true";
  post.args = {"true", "x"};
  post.env = {"A=1"};
  post.timeout = 3;
  hooks.poststart.push_back(post);
  hooks.poststop.push_back(post);
  hooks.poststop.push_back(post);
  const json recorded = runtime_hooks_to_json(hooks);
  EXPECT_FALSE(recorded.contains("createRuntime"));
  auto back = runtime_hooks_from_json(json::parse(recorded.dump()), "state.json");
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_TRUE(back->create_runtime.empty());
  ASSERT_EQ(back->poststop.size(), 2u);
  EXPECT_EQ(back->poststop[1].name, "hooks.poststop[1]");
  EXPECT_EQ(back->poststart.at(0).args, post.args);
  EXPECT_EQ(back->poststart.at(0).env, post.env);
  EXPECT_EQ(back->poststart.at(0).timeout, 3);
}

TEST(OciHooksRun, TheHookReadsTheStateAndArgsZeroIsArgvZero) {
  testing::TempDir temp;
  const fs::path out = temp / "out";
  spec::Hook hook;
  hook.name = "hooks.poststart[0]";
  // busybox picks its applet from argv[0]: "sh" only if args[0] is argv[0].
  hook.path = "/bin/busybox";
  hook.args = {"sh", "-c", "cat > \"$0\"", out.string()};
  ASSERT_TRUE(run_hooks({hook}, {"c1", "running", 7, "/b", {}}).ok());
  const auto state = json::parse(testing::read_file(out));
  EXPECT_EQ(state["status"], "running");
  EXPECT_EQ(state["pid"], 7);
}

TEST(OciHooksRun, EnvIsExactlyTheHooks) {
  testing::TempDir temp;
  const fs::path out = temp / "env";
  ::setenv("PULSEBOX_HOOK_TEST_SECRET", "runtime-only", 1);
  spec::Hook hook;
  hook.name = "hooks.poststop[0]";
  hook.path = "/usr/bin/env";
  hook.args = {"env"};
  hook.env = {"HOOK_VAR=1", "OTHER=two words"};
  // env prints its environment on stdout, which goes to the log: wrap it.
  auto wrapped = shell_hook("/usr/bin/env > " + out.string(), {"HOOK_VAR=1"});
  const bool ran = run_hooks({hook, wrapped}, {"c1", "stopped", 0, "/b", {}}).ok();
  ::unsetenv("PULSEBOX_HOOK_TEST_SECRET");
  ASSERT_TRUE(ran);
  const std::string env = testing::read_file(out);
  EXPECT_NE(env.find("HOOK_VAR=1\n"), std::string::npos) << env;
  EXPECT_EQ(env.find("PULSEBOX_HOOK_TEST_SECRET"), std::string::npos) << env;
  EXPECT_EQ(env.find("HOME="), std::string::npos) << env;
}

TEST(OciHooksRun, AFailureNamesTheHookItsStatusAndItsStderr) {
  auto status = run_hooks({shell_hook("echo partial; echo 'no network for you' >&2; exit 3")},
                          {"c1", "creating", 7, "/b", {}});
  ASSERT_FALSE(status.ok());
  const std::string message = status.error().message();
  EXPECT_NE(message.find("hooks.createRuntime[0] (/bin/sh): exited with status 3: no network "
                         "for you"),
            std::string::npos)
      << message;
  // The first failure stops the rest.
  testing::TempDir temp;
  auto second = shell_hook("echo ran > " + (temp / "second").string());
  EXPECT_FALSE(run_hooks({shell_hook("exit 1"), second}, {"c1", "creating", 7, "/b", {}}).ok());
  EXPECT_FALSE(fs::exists(temp / "second"));
  // A warning run goes on after a failure.
  run_hooks_warning_on_failure({shell_hook("exit 1"), second}, {"c1", "stopped", 7, "/b", {}});
  EXPECT_TRUE(fs::exists(temp / "second"));
}

TEST(OciHooksRun, AMissingProgramIsNamed) {
  spec::Hook hook = shell_hook("");
  hook.path = "/no/such/hook";
  auto status = run_hooks({hook}, {"c1", "creating", 7, "/b", {}});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("hooks.createRuntime[0] (/no/such/hook): could not be "
                                          "run"),
            std::string::npos)
      << status.error().message();
}

TEST(OciHooksRun, TheTimeoutKillsTheHooksWholeProcessGroup) {
  testing::TempDir temp;
  const fs::path pid_file = temp / "child";
  // A background child of the hook, in its process group, must go too.
  auto hook = shell_hook("/bin/sleep 60 & echo $! > " + pid_file.string() + "; wait", {}, 2);
  const auto started = std::chrono::steady_clock::now();
  auto status = run_hooks({hook}, {"c1", "creating", 7, "/b", {}});
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message().find("after its timeout of 2 s"), std::string::npos)
      << status.error().message();
  EXPECT_LT(took, std::chrono::seconds(10));
  const std::string written = testing::read_file(pid_file);
  ASSERT_FALSE(written.empty()) << "the hook had not started its child at the timeout";
  const pid_t child = std::stoi(written);
  // Killed; reaped by init (or a subreaper) soon after. Bounded wait.
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    const std::string stat = testing::read_file("/proc/" + std::to_string(child) + "/stat");
    gone = stat.empty() || stat.find(") Z") != std::string::npos;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << "the hook's child " << child << " outlived the timeout";
}

// The container's process gets its hooks and sysctls as data.
TEST(OciHooksPlan, ContainerHooksAndSysctlsAreInThePlan) {
  json config = json::parse(R"({
    "ociVersion": "1.2.1",
    "root": {"path": "rootfs"},
    "process": {"user": {"uid": 0, "gid": 0}, "args": ["/bin/sh"], "cwd": "/"},
    "annotations": {"a": "b"},
    "hooks": {
      "createContainer": [{"path": "/bin/c", "args": ["c", "1"], "env": ["E=1"], "timeout": 4}],
      "startContainer": [{"path": "/bin/s"}]
    },
    "linux": {"namespaces": [{"type": "pid"}, {"type": "mount"}, {"type": "network"},
                             {"type": "ipc"}],
              "sysctl": {"net.ipv4.ip_forward": "1", "kernel.shmmax": "65536",
                         "net/ipv4/conf/eth0.100/forwarding": "1"}}
  })");
  auto parsed = spec::parse_spec(config.dump(), "/bundle");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message();
  PlanInputs inputs;
  inputs.container_id = "c1";
  auto plan = build_container_plan(*parsed, inputs);
  ASSERT_TRUE(plan.ok()) << plan.error().message();

  ASSERT_EQ(plan->sysctls.size(), 3u);
  EXPECT_EQ(plan->sysctls[0].directory, "proc/sys/kernel");
  EXPECT_EQ(plan->sysctls[0].name, "shmmax");
  EXPECT_EQ(plan->sysctls[0].value, "65536");
  EXPECT_EQ(plan->sysctls[0].stage, "writing linux.sysctl.kernel.shmmax");
  // A dot inside a name (a VLAN interface) stays a dot in the path.
  EXPECT_EQ(plan->sysctls[1].directory, "proc/sys/net/ipv4/conf/eth0.100");
  EXPECT_EQ(plan->sysctls[1].name, "forwarding");
  EXPECT_EQ(plan->sysctls[2].directory, "proc/sys/net/ipv4");
  EXPECT_EQ(plan->sysctls[2].name, "ip_forward");

  EXPECT_FALSE(plan->pause_for_runtime_hooks);
  ASSERT_EQ(plan->create_container_hooks.size(), 1u);
  const auto& hook = plan->create_container_hooks[0];
  EXPECT_EQ(hook.stage, "hooks.createContainer[0] (/bin/c)");
  EXPECT_EQ(hook.args, (std::vector<std::string>{"c", "1"}));
  EXPECT_EQ(hook.env, (std::vector<std::string>{"E=1"}));
  EXPECT_EQ(hook.timeout_seconds, 4);
  ASSERT_EQ(hook.argv.size(), 3u);  // sealed
  EXPECT_EQ(hook.argv[2], nullptr);
  ASSERT_EQ(plan->start_container_hooks.size(), 1u);
  EXPECT_EQ(plan->start_container_hooks[0].args, (std::vector<std::string>{"/bin/s"}));
  EXPECT_EQ(plan->start_container_hooks[0].timeout_seconds, kDefaultHookTimeoutSeconds);
  // The process ends each state with its pid and "}".
  const auto state = json::parse(plan->create_container_state + "42}");
  EXPECT_EQ(state["status"], "creating");
  EXPECT_EQ(state["id"], "c1");
  EXPECT_EQ(state["pid"], 42);
  EXPECT_EQ(state["annotations"]["a"], "b");
  EXPECT_EQ(json::parse(plan->start_container_state + "42}")["status"], "created");

  config["hooks"] = json::parse(R"({"prestart": [{"path": "/bin/p"}]})");
  auto with_runtime_hook = spec::parse_spec(config.dump(), "/bundle");
  ASSERT_TRUE(with_runtime_hook.ok());
  auto paused = build_container_plan(*with_runtime_hook, inputs);
  ASSERT_TRUE(paused.ok()) << paused.error().message();
  EXPECT_TRUE(paused->pause_for_runtime_hooks);
  EXPECT_TRUE(paused->create_container_hooks.empty());
}

}  // namespace
}  // namespace pulsebox::oci
