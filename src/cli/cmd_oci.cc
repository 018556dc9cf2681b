// pulsebox oci [GLOBAL FLAGS] COMMAND ... : an OCI runtime for podman,
// containerd and Kubernetes (docs/oci.md). Also reached as `pulsebox-runc`
// (main.cc turns that argv[0] into `pulsebox oci`). The flags and commands
// are runc's, as engines call them; the work is in src/oci/commands/.
#include <unistd.h>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/output.h"
#include "core/fs.h"
#include "oci/cgroups.h"
#include "oci/commands/commands.h"
#include "oci/hooks.h"
#include "oci/log.h"
#include "oci/process_ref.h"
#include "oci/self_exe.h"
#include "oci/spec/features.h"
#include "oci/state_store.h"
#include "pulsebox/version.h"

namespace pulsebox::cli {
namespace {

// runc's exit status for every failure: engines look at the message.
constexpr int kOciFailed = 1;

struct OciGlobals {
  std::string root;
  std::string log;
  std::string log_format = "text";
  std::string log_level;
  bool debug = false;
  bool systemd_cgroup = false;
  std::string cgroup_manager;
  std::string rootless;
  std::string criu;
  bool version = false;
};

// Runs one command: checks the global flags, sets up the log, opens the
// state root, and reports an error to the log and to stderr.
class OciCommand {
 public:
  explicit OciCommand(const OciGlobals& globals) : globals_(globals) {}

  template <class Body>
  int run(const char* name, Body body) {
    if (auto status = setup(); !status.ok()) return fail(name, status.error());
    auto store = open_store();
    if (!store) return fail(name, store.error());
    core::Status status = body(*store);
    if (!status.ok()) return fail(name, status.error());
    return kExitOk;
  }

  // A command refused before any work: the log is set up first, so the
  // refusal reaches --log like any error.
  int refuse(const char* name, const core::Error& error) {
    if (auto status = setup(); !status.ok()) return fail(name, status.error());
    return fail(name, error);
  }

  int fail(const char* name, const core::Error& error) {
    const std::string message = std::string(name) + ": " + error.to_string();
    log_.write(oci::LogLevel::Error, message);
    // Without --log the log is stderr already.
    if (!log_.to_stderr()) print_error(message);
    return kOciFailed;
  }

  oci::Log& log() { return log_; }

 private:
  core::Status setup() {
    PB_CHECK(log_.configure(globals_.log, globals_.log_format, globals_.log_level, globals_.debug));
    oci::set_hook_log(&log_);  // hook output and warnings go to --log
    const auto refuse = [](std::string message) {
      return core::Error(core::ErrorKind::kUnsupported, "oci", std::move(message));
    };
    if (globals_.systemd_cgroup) return refuse(std::string(oci::kSystemdCgroupRefusal));
    if (!globals_.cgroup_manager.empty() && globals_.cgroup_manager != "cgroupfs")
      return refuse("--cgroup-manager " + globals_.cgroup_manager +
                    ": pulsebox oci manages cgroupfs paths only; use --cgroup-manager cgroupfs");
    if (!globals_.criu.empty())
      return refuse("--criu: pulsebox oci does not checkpoint or restore; remove the flag");
    if (!globals_.rootless.empty() && globals_.rootless != "auto") {
      const bool rootless = ::geteuid() != 0;
      if ((globals_.rootless == "true") != rootless)
        return refuse("--rootless " + globals_.rootless + " contradicts this process (uid " +
                      std::to_string(::geteuid()) + "); drop the flag or use --rootless auto");
    }
    return core::ok_status();
  }

  core::Result<oci::StateStore> open_store() {
    std::filesystem::path root = globals_.root;
    if (root.empty()) {
      PB_TRY(fallback, oci::StateStore::default_root());
      root = fallback;
    }
    return oci::StateStore::open(root);
  }

  const OciGlobals& globals_;
  oci::Log log_;
};

struct IdOptions {
  std::string id;
  std::string signal = "TERM";
  bool all = false;
  bool force = false;
  std::string format = "table";
  bool quiet = false;
};

struct RunFlags {
  bool detach = false;
  bool keep = false;
  bool no_pivot = false;
};

// runc's create/run flags, as conmon and containerd's shim pass them.
void add_create_options(CLI::App* command, oci::commands::CreateOptions& options) {
  command->add_option("-b,--bundle", options.bundle, "The bundle directory (default .)");
  command->add_option("--pid-file", options.pid_file, "Write the container's pid here");
  command->add_option("--console-socket", options.console_socket,
                      "Send the pseudo-terminal's master to this AF_UNIX socket");
  command->add_option("--preserve-fds", options.preserve_fds,
                      "Pass fds 3 .. 3+N-1 on to the container");
  command->add_flag("--no-new-keyring", options.no_new_keyring,
                    "Keep this session keyring (no new one)");
  command->add_flag("--no-subreaper")
      ->description("Accepted; has no effect (pulsebox oci reaps nothing)");
  command->add_option("id", options.id, "Container ID")->required();
}

core::Status print_out(std::string_view text) {
  return core::write_all(STDOUT_FILENO, text, "stdout");
}

// A runc command pulsebox oci does not offer, refused by name with why.
void add_refused(CLI::App* oci, std::shared_ptr<OciGlobals> globals, int& exit_code,
                 const char* name, const char* why) {
  CLI::App* command = oci->add_subcommand(name, std::string("Refused: ") + why);
  command->allow_extras();
  command->callback([globals, &exit_code, name, why] {
    OciCommand cmd(*globals);
    exit_code = cmd.refuse(name, core::Error(core::ErrorKind::kUnsupported, "oci",
                                             std::string("not supported by pulsebox oci: ") + why));
  });
}

// `exec`, as conmon (`--process F --detach --pid-file P`), containerd's shim
// and runc's inline form (`exec ID ARGS...`) call it.
void add_exec_command(CLI::App* oci, std::shared_ptr<OciGlobals> globals, int& exit_code) {
  auto options = std::make_shared<oci::commands::ExecOptions>();
  CLI::App* command =
      oci->add_subcommand("exec", "Run a process in a created or running container");
  command->add_option("-p,--process", options->process_file, "The process as JSON (runtime-spec)");
  command->add_flag("-d,--detach", options->detach, "Exit once the process runs");
  command->add_option("--pid-file", options->pid_file, "Write the process's pid here");
  command->add_option("--console-socket", options->console_socket,
                      "Send the pseudo-terminal's master to this AF_UNIX socket");
  command->add_flag("-t,--tty", options->tty, "Give the process a terminal (inline form)");
  command->add_option("--cwd", options->cwd, "Working directory in the container (inline form)");
  command->add_option("-e,--env", options->env, "KEY=VALUE added to the environment")
      ->allow_extra_args(false);
  command->add_option("-u,--user", options->user, "UID[:GID] (inline form)");
  command->add_option("-c,--cap", options->caps, "A capability to add (inline form)")
      ->allow_extra_args(false);
  command->add_flag("--no-new-privs", options->no_new_privileges, "Set no_new_privs");
  command->add_option("--preserve-fds", options->preserve_fds,
                      "Pass fds 3 .. 3+N-1 on to the process");
  // ID [ARGS...]: the flags end at the ID, so the program's own (`sh -c`,
  // `ls -l`) are never taken for exec's.
  command->prefix_command();
  command->footer("Usage: exec [FLAGS] ID [PROGRAM ARGS...]");
  command->callback([command, globals, options, &exit_code] {
    OciCommand cmd(*globals);
    // Before any work (no descriptor open yet): the process is a copy of
    // this one, so it must run from a binary no container can write.
    if (auto self = oci::run_from_unwritable_binary(); !self.ok()) {
      exit_code = cmd.refuse("exec", self.error());
      return;
    }
    int status = 0;
    exit_code = cmd.run("exec", [&](oci::StateStore& store) -> core::Status {
      auto rest = command->remaining();
      if (rest.empty())
        return core::Error(core::ErrorKind::kInvalidInput, "oci", "exec: give the container ID");
      options->id = rest.front();
      options->args.assign(rest.begin() + 1, rest.end());
      PB_TRY(code, oci::commands::exec(store, *options));
      status = code;
      return core::ok_status();
    });
    if (exit_code == kExitOk) exit_code = status;
  });
}

}  // namespace

void register_oci_command(CLI::App& app, int& exit_code) {
  auto globals = std::make_shared<OciGlobals>();
  CLI::App* oci = app.add_subcommand(
      "oci", "An OCI runtime for podman, containerd and Kubernetes (also `pulsebox-runc`)");
  oci->require_subcommand(0, 1);
  oci->add_option("--root", globals->root,
                  "State directory (default /run/pulsebox-oci, or $XDG_RUNTIME_DIR/pulsebox-oci)");
  oci->add_option("--log", globals->log, "Append log lines to this file (default stderr)");
  oci->add_option("--log-format", globals->log_format, "text or json (logrus lines)");
  oci->add_option("--log-level", globals->log_level, "debug, info, warn or error");
  oci->add_flag("--debug", globals->debug, "Log at debug level");
  oci->add_flag("--systemd-cgroup", globals->systemd_cgroup, "Refused: cgroupfs paths only");
  oci->add_option("--cgroup-manager", globals->cgroup_manager, "cgroupfs only");
  oci->add_option("--rootless", globals->rootless, "true, false or auto (checked, not chosen)");
  oci->add_option("--criu", globals->criu, "Refused: no checkpoint/restore");
  oci->add_flag("-v,--version", globals->version, "Print the version");
  oci->callback([oci, globals, &exit_code] {
    if (!oci->get_subcommands().empty()) return;
    if (globals->version) {
      std::cout << "pulsebox-runc version " << pulsebox::version()
                << "\ncommit: unknown\nspec: " << oci::kOciVersion << "\n";
      return;
    }
    print_error("oci: give a command (see `pulsebox oci --help`)");
    exit_code = kExitUsage;
  });

  auto options = std::make_shared<IdOptions>();

  CLI::App* state = oci->add_subcommand("state", "Print a container's state as JSON");
  state->add_option("id", options->id, "Container ID")->required();
  state->callback([globals, options, &exit_code] {
    OciCommand cmd(*globals);
    exit_code = cmd.run("state", [&](oci::StateStore& store) -> core::Status {
      PB_TRY(text, oci::commands::state(store, options->id));
      return print_out(text + "\n");
    });
  });

  CLI::App* kill = oci->add_subcommand("kill", "Send a signal to a container's process");
  kill->add_flag("-a,--all", options->all, "Signal every process in the container's cgroup");
  kill->add_option("id", options->id, "Container ID")->required();
  kill->add_option("signal", options->signal, "A number, a name (TERM, SIGKILL) or RTMIN+n");
  kill->callback([globals, options, &exit_code] {
    OciCommand cmd(*globals);
    exit_code = cmd.run("kill", [&](oci::StateStore& store) -> core::Status {
      PB_TRY(signal, oci::parse_signal(options->signal));
      return oci::commands::kill(store, options->id, signal, options->all);
    });
  });

  CLI::App* remove = oci->add_subcommand("delete", "Remove a container and its cgroups");
  remove->add_flag("-f,--force", options->force, "Kill it first if it is running");
  remove->add_option("id", options->id, "Container ID")->required();
  remove->callback([globals, options, &exit_code] {
    OciCommand cmd(*globals);
    exit_code = cmd.run("delete", [&](oci::StateStore& store) {
      return oci::commands::remove(store, options->id, options->force);
    });
  });

  CLI::App* list = oci->add_subcommand("list", "List the containers under --root");
  list->add_option("-f,--format", options->format, "table or json");
  list->add_flag("-q,--quiet", options->quiet, "Print the IDs only");
  list->callback([globals, options, &exit_code] {
    OciCommand cmd(*globals);
    exit_code = cmd.run("list", [&](oci::StateStore& store) -> core::Status {
      if (options->quiet) {
        std::string ids;
        for (const auto& id : store.ids())
          ids += id + "\n";
        return print_out(ids);
      }
      PB_TRY(text, oci::commands::list(store, options->format));
      return print_out(text);
    });
  });

  CLI::App* ps = oci->add_subcommand("ps", "List the processes in a container's cgroup");
  ps->add_option("-f,--format", options->format, "table or json (a JSON array of pids)");
  ps->add_option("id", options->id, "Container ID")->required();
  ps->callback([globals, options, &exit_code] {
    OciCommand cmd(*globals);
    exit_code = cmd.run("ps", [&](oci::StateStore& store) -> core::Status {
      PB_TRY(text, oci::commands::processes(store, options->id, options->format));
      return print_out(text);
    });
  });

  CLI::App* reconcile = oci->add_subcommand(
      "reconcile", "Remove the stopped containers under --root, and what crashed commands left");
  reconcile->callback([globals, &exit_code] {
    OciCommand cmd(*globals);
    exit_code = cmd.run("reconcile", [&](oci::StateStore& store) -> core::Status {
      std::vector<std::string> problems;
      for (const auto& id : oci::commands::reconcile(store, problems))
        cmd.log().write(oci::LogLevel::Info, "reconcile: removed container " + id);
      if (problems.empty()) return core::ok_status();
      std::string text = "could not remove:";
      for (const auto& problem : problems)
        text += "\n  " + problem;
      return core::Error(core::ErrorKind::kIo, "oci", text);
    });
  });

  auto create_options = std::make_shared<oci::commands::CreateOptions>();
  auto run_flags = std::make_shared<RunFlags>();
  for (const char* name : {"create", "run"}) {
    const bool is_run = std::string_view(name) == "run";
    CLI::App* command = oci->add_subcommand(
        name, is_run ? "Create and start a container, wait for it and delete it"
                     : "Create a container from a bundle; it waits for `start`");
    add_create_options(command, *create_options);
    if (is_run) {
      command->add_flag("-d,--detach", run_flags->detach, "Exit once the container started");
      command->add_flag("--keep", run_flags->keep, "Do not delete the container after it exits");
    }
    command->callback([globals, create_options, run_flags, &exit_code, name, is_run] {
      OciCommand cmd(*globals);
      // As exec's: the container's process is a copy of this one.
      if (auto self = oci::run_from_unwritable_binary(); !self.ok()) {
        exit_code = cmd.refuse(name, self.error());
        return;
      }
      int status = 0;
      create_options->warn = [&cmd](std::string_view message) {
        cmd.log().write(oci::LogLevel::Warn, message);
      };
      exit_code = cmd.run(name, [&](oci::StateStore& store) -> core::Status {
        if (run_flags->no_pivot)
          return core::Error(core::ErrorKind::kUnsupported, "oci",
                             "--no-pivot: pivot_root is required; remove the flag");
        if (!is_run) {
          PB_TRY(created, oci::commands::create(store, *create_options));
          // Only into a --log file: runc prints nothing on success, and
          // conmon and the shim pass create's stderr on to the user.
          if (!cmd.log().to_stderr())
            cmd.log().write(oci::LogLevel::Info,
                            "create " + created.id + ": enforced " + created.enforced);
          return core::ok_status();
        }
        PB_TRY(code,
               oci::commands::run(store, *create_options, run_flags->detach, run_flags->keep));
        status = code;
        return core::ok_status();
      });
      if (exit_code == kExitOk) exit_code = status;
    });
    command->add_flag("--no-pivot", run_flags->no_pivot, "Refused: pivot_root is required");
  }

  CLI::App* start = oci->add_subcommand("start", "Start a created container");
  start->add_option("id", options->id, "Container ID")->required();
  start->callback([globals, options, &exit_code] {
    OciCommand cmd(*globals);
    exit_code = cmd.run(
        "start", [&](oci::StateStore& store) { return oci::commands::start(store, options->id); });
  });
  add_exec_command(oci, globals, exit_code);
  // Built from the config reader's own tables, so it cannot promise more
  // than create reads.
  oci->add_subcommand("features", "Print the runtime's features (runtime-spec features.md)")
      ->callback([&exit_code] {
        exit_code = print_out(oci::spec::features_document().dump(2) + "\n").ok() ? 0 : 1;
      });
  add_refused(oci, globals, exit_code, "pause",
              "the freezer is not managed; stop the container instead");
  add_refused(oci, globals, exit_code, "resume",
              "the freezer is not managed; stop the container instead");
  add_refused(oci, globals, exit_code, "update",
              "a container's resources are fixed at create; recreate it with new limits");
  add_refused(oci, globals, exit_code, "checkpoint", "no checkpoint/restore (CRIU)");
  add_refused(oci, globals, exit_code, "restore", "no checkpoint/restore (CRIU)");
  add_refused(oci, globals, exit_code, "events",
              "no resident process watches containers; poll `state` instead");
}

}  // namespace pulsebox::cli
