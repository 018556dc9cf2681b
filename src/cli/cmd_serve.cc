// pulsebox serve --local [--socket PATH] [--no-prestart] [--verbose]
// (see docs/cli.md and server/local_server.h). The remote backend's
// server (--listen ... --token-file ...) is not part of this build yet.
#include <memory>

#include "backends/native_runtime.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "server/local_server.h"

namespace pulsebox::cli {

void register_serve_command(CLI::App& app, int& exit_code) {
  struct ServeOptions {
    bool local = false;
    std::string socket;
    bool no_prestart = false;
    bool verbose = false;
    std::string listen;
    std::string token_file;
  };
  auto o = std::make_shared<ServeOptions>();
  CLI::App* serve = app.add_subcommand(
      "serve",
      "Serve runs: --local keeps a resident supervisor for this user's `pulsebox run`s "
      "(same results, a fraction of the start-up cost)");
  serve->add_flag("--local", o->local,
                  "Serve `pulsebox run` of this user on this machine, through a Unix socket in "
                  "the state directory");
  serve->add_option("--socket", o->socket,
                    "The socket (default <state directory>/server.sock, where `pulsebox run` "
                    "looks; elsewhere, clients need PULSEBOX_SERVER=PATH)");
  serve->add_flag("--no-prestart", o->no_prestart,
                  "Do not start each run's sandbox ahead (it then starts when the run does)");
  serve->add_flag("--verbose", o->verbose, "One line per run on stderr");
  serve->add_option("--listen", o->listen, "unix:PATH or tcp:127.0.0.1:PORT (remote backend)");
  serve->add_option("--token-file", o->token_file, "The remote backend's token");
  serve->callback([o, &exit_code] {
    if (!o->local) {
      print_error(
          "serve: the remote backend's server (--listen, --token-file) is not part of this build "
          "yet; `pulsebox serve --local` serves this user's own runs on this machine");
      exit_code = kExitUsage;
      return;
    }
    if (!o->listen.empty() || !o->token_file.empty()) {
      print_error("serve: --local takes no --listen or --token-file (it listens on --socket)");
      exit_code = kExitUsage;
      return;
    }
    server::LocalServerOptions options;
    options.state_dir = std::filesystem::absolute(backends::default_state_dir());
    if (!o->socket.empty()) options.socket_path = std::filesystem::absolute(o->socket);
    options.prestart = !o->no_prestart;
    options.verbose = o->verbose;
    exit_code = server::serve_locally(options);
  });
}

}  // namespace pulsebox::cli
