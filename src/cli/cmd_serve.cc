// pulsebox serve --local [--socket PATH] [--no-prestart] [--verbose]
// (see docs/cli.md and server/local_server.h), and
// pulsebox serve --listen ADDR --token-file F [...]: the protocol over HTTP,
// served by the pulsebox-http helper this command runs in its place (this
// executable is static, and Debian's HTTP library is a shared one).
#include <unistd.h>

#include <cstring>
#include <memory>

#include "backends/native_runtime.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "core/libexec_helper.h"
#include "server/local_server.h"

namespace pulsebox::cli {
namespace {

struct ServeOptions {
  bool local = false;
  std::string socket;
  bool no_prestart = false;
  bool verbose = false;
  std::string listen;
  std::string token_file;
  std::string tls_cert;
  std::string tls_key;
  std::string max_runs;
  std::string max_queue;
  std::string shutdown_grace;
  std::string max_memory, max_pids, max_cpus, max_timeout, max_disk;
  std::string max_upload, max_upload_files, max_uploads;
};

// Replaces this process with `pulsebox-http serve` and the same options;
// returns only on failure.
int exec_http_server(const ServeOptions& o) {
  auto helper = core::find_libexec_helper("pulsebox-http", "http", "serve");
  if (!helper.ok()) {
    print_error("serve --listen: " + helper.error().to_string());
    return kExitUsage;
  }
  std::vector<std::string> args = {helper.value(), "serve",        "--listen",
                                   o.listen,       "--token-file", o.token_file};
  const std::pair<const char*, const std::string*> optional[] = {
      {"--tls-cert", &o.tls_cert},
      {"--tls-key", &o.tls_key},
      {"--max-runs", &o.max_runs},
      {"--max-queue", &o.max_queue},
      {"--shutdown-grace", &o.shutdown_grace},
      {"--max-memory", &o.max_memory},
      {"--max-pids", &o.max_pids},
      {"--max-cpus", &o.max_cpus},
      {"--max-timeout", &o.max_timeout},
      {"--max-disk", &o.max_disk},
      {"--max-upload", &o.max_upload},
      {"--max-upload-files", &o.max_upload_files},
      {"--max-uploads", &o.max_uploads}};
  for (const auto& [flag, value] : optional) {
    if (value->empty()) continue;
    args.push_back(flag);
    args.push_back(*value);
  }
  args.push_back("--state-dir");
  args.push_back(std::filesystem::absolute(backends::default_state_dir()).string());
  core::exec_program(args);
  print_error("serve --listen: cannot run " + helper.value() + ": " + std::strerror(errno));
  return kExitUsage;
}

}  // namespace

void register_serve_command(CLI::App& app, int& exit_code) {
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
  serve->add_option("--listen", o->listen,
                    "Serve the protocol over HTTP on unix:/PATH or HOST:PORT (loopback unless "
                    "TLS is given; docs/protocol.md)");
  serve->add_option("--token-file", o->token_file,
                    "With --listen: the bearer token every request must carry (mode 0600, "
                    "at least 32 bytes)");
  serve->add_option("--tls-cert", o->tls_cert, "With --listen: PEM certificate, to serve HTTPS");
  serve->add_option("--tls-key", o->tls_key, "With --listen: the certificate's PEM key");
  serve->add_option("--max-runs", o->max_runs, "With --listen: runs at once (default: the CPUs)");
  serve->add_option("--max-queue", o->max_queue,
                    "With --listen: runs waiting for a slot (default 64)");
  serve->add_option("--shutdown-grace", o->shutdown_grace,
                    "With --listen: seconds runs get to finish after SIGTERM (default 30)");
  serve->add_option("--max-memory", o->max_memory,
                    "With --listen: the most memory a run may have (e.g. 4G; asked-for limits "
                    "above it are clamped, and the run told)");
  serve->add_option("--max-pids", o->max_pids, "With --listen: the most processes a run may have");
  serve->add_option("--max-cpus", o->max_cpus, "With --listen: the most CPUs a run may have");
  serve->add_option("--max-timeout", o->max_timeout,
                    "With --listen: the longest a run may take (e.g. 30m)");
  serve->add_option("--max-disk", o->max_disk, "With --listen: the most disk a run may write");
  serve->add_option("--max-upload", o->max_upload,
                    "With --listen: the most file content an uploaded workspace may hold "
                    "(default 1G)");
  serve->add_option("--max-upload-files", o->max_upload_files,
                    "With --listen: the most entries an uploaded workspace may hold "
                    "(default 200000)");
  serve->add_option("--max-uploads", o->max_uploads,
                    "With --listen: uploaded workspaces kept, the least recently used beyond "
                    "evicted (default 16)");
  serve->callback([o, &exit_code] {
    if (o->local && (!o->listen.empty() || !o->token_file.empty())) {
      print_error("serve: --local takes no --listen or --token-file (it listens on --socket)");
      exit_code = kExitUsage;
      return;
    }
    if (!o->local) {
      if (o->listen.empty() || o->token_file.empty()) {
        print_error(
            "serve: say --local (this user's runs on this machine) or --listen ADDR "
            "--token-file FILE (the protocol over HTTP)");
        exit_code = kExitUsage;
        return;
      }
      exit_code = exec_http_server(*o);
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
