// pulsebox-http serve --listen ADDR --token-file F [--tls-cert F --tls-key F]
//   [--max-runs N] [--max-queue N] [--shutdown-grace SECONDS] [--state-dir DIR]
//   [--max-upload SIZE] [--max-upload-files N] [--max-uploads N]
// The protocol over HTTP (http/http_server.h). `pulsebox serve --listen`
// runs this program: the pulsebox CLI is static and cannot link the HTTP
// library. Logs go to stderr; exit 0 after a graceful shutdown, 2 for bad
// arguments, 1 when the server cannot start.
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "http/http_server.h"
#include "http/remote_run.h"
#include "http/routes.h"
#include "http/run_service.h"
#include "http/shutdown_signals.h"
#include "http/upload_store.h"
#include "model/limits_parse.h"
#include "pulsebox/audit.h"
#include "pulsebox/backend.h"

int main(int argc, char** argv) {
  using namespace pulsebox::http;
  // `pulsebox run` on a remote server: the CLI runs this in its place
  // (http/remote_run.h), with run's own arguments.
  if (argc > 1 && std::string_view(argv[1]) == "remote-run") return remote_run(argc - 2, argv + 2);
  CLI::App app("pulsebox-http: the pulsebox protocol over HTTP", "pulsebox-http");
  app.require_subcommand(1);
  CLI::App* serve = app.add_subcommand("serve", "Serve the protocol until SIGTERM or SIGINT");
  ServerConfig config;
  unsigned grace_seconds = static_cast<unsigned>(config.shutdown_grace.count());
  std::string tls_cert, tls_key, state_dir;
  serve
      ->add_option("--listen", config.listen,
                   "unix:/path/to/socket, or HOST:PORT (loopback unless TLS is given)")
      ->required();
  serve
      ->add_option("--token-file", config.token_file,
                   "The bearer token every request must carry (mode 0600, owned by this user, "
                   "at least 32 bytes)")
      ->required();
  serve->add_option("--tls-cert", tls_cert, "PEM certificate: serve HTTPS");
  serve->add_option("--tls-key", tls_key, "PEM private key of --tls-cert");
  serve->add_option("--max-runs", config.max_runs, "Runs at once (default: the CPUs)")
      ->check(CLI::PositiveNumber);
  serve->add_option("--max-queue", config.max_queue, "Runs waiting for a slot (default 64)");
  serve->add_option("--shutdown-grace", grace_seconds,
                    "Seconds runs get to finish after SIGTERM before they are cancelled");
  serve->add_option("--state-dir", state_dir, "pulsebox's state directory");
  RunMaxima maxima;
  serve->add_option("--max-memory", maxima.memory, "The most memory a run may ask for (e.g. 4G)");
  serve->add_option("--max-pids", maxima.pids, "The most processes a run may ask for");
  serve->add_option("--max-cpus", maxima.cpus, "The most CPUs a run may ask for (e.g. 2)");
  serve->add_option("--max-timeout", maxima.timeout, "The longest a run may ask for (e.g. 30m)");
  serve->add_option("--max-disk", maxima.disk, "The most disk a run may write (e.g. 10G)");
  UploadLimits upload_limits;
  std::string max_upload;
  serve->add_option("--max-upload", max_upload,
                    "The most file content an uploaded workspace may hold (default 1G)");
  serve
      ->add_option("--max-upload-files", upload_limits.max_files,
                   "The most entries an uploaded workspace may hold (default 200000)")
      ->check(CLI::PositiveNumber);
  serve
      ->add_option("--max-uploads", upload_limits.max_uploads,
                   "Uploaded workspaces kept; the least recently used beyond go (default 16)")
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!max_upload.empty()) {
    auto parsed = pulsebox::model::parse_size(max_upload, "--max-upload");
    if (!parsed) {
      std::fprintf(stderr, "pulsebox-http: %s\n", parsed.error().to_string().c_str());
      return 2;
    }
    upload_limits.max_bytes = parsed.value();
  }
  spdlog::set_default_logger(spdlog::stderr_logger_mt("pulsebox-http"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z pulsebox-http %l: %v");
  if (!tls_cert.empty()) config.tls_cert = tls_cert;
  if (!tls_key.empty()) config.tls_key = tls_key;
  config.shutdown_grace = std::chrono::seconds(grace_seconds);

  // Before any thread starts, so that every thread has them blocked.
  HttpServer* running = nullptr;
  std::atomic<bool> stop_requested{false};
  if (auto watched = watch_shutdown_signals([&] {
        stop_requested = true;
        if (HttpServer* server = std::atomic_ref(running).load()) server->begin_shutdown();
      });
      !watched.ok()) {
    std::fprintf(stderr, "pulsebox-http: %s\n", watched.error().to_string().c_str());
    return 1;
  }
  auto server = HttpServer::create(config);
  if (!server.ok()) {
    std::fprintf(stderr, "pulsebox-http: %s\n", server.error().to_string().c_str());
    return 1;
  }
  // The server's own audit log, beside the runs' state; each line carries
  // the client's identity, never the token.
  std::unique_ptr<pulsebox::AuditLog> audit_log;
  if (state_dir.empty()) {
    spdlog::warn("no --state-dir: refused requests are logged but not audited");
  } else {
    try {
      audit_log = std::make_unique<pulsebox::AuditLog>(
          std::filesystem::path(state_dir) / "audit" / "http.jsonl", nullptr,
          pulsebox::AuditLog::Options{.key = pulsebox::default_audit_key_location()});
    } catch (const std::exception& e) {
      std::fprintf(stderr, "pulsebox-http: --state-dir: the audit log: %s\n", e.what());
      return 1;
    }
    if (!audit_log->key_warning().empty()) spdlog::warn("audit log: {}", audit_log->key_warning());
    server.value()->set_auditor([log = audit_log.get()](const AuditEvent& event) {
      pulsebox::AuditRecord record{.action = std::string(event.action),
                                   .target = std::string(event.target),
                                   .decision = std::string(event.decision),
                                   .detail = std::string(event.detail)};
      record.extra = {{"transport", event.client.transport},
                      {"client_address", event.client.address}};
      if (event.client.uid) record.extra.emplace_back("uid", std::int64_t{*event.client.uid});
      if (event.client.pid)
        record.extra.emplace_back("client_pid", std::int64_t{*event.client.pid});
      try {
        log->record(record);
      } catch (const std::exception& e) {
        spdlog::error("audit log: {}", e.what());
      }
    });
  }
  // Runs left by a server that ended without cleaning up, before new ones.
  if (!state_dir.empty()) {
    pulsebox::NativeBackendOptions native;
    native.state_dir = state_dir;
    try {
      for (const auto& line : pulsebox::make_native_backend(native)->reconcile())
        spdlog::info("reconcile: {}", line);
    } catch (const std::exception& e) {
      spdlog::warn("reconcile: {}", e.what());
    }
  }
  // Uploaded workspaces live in the state directory; without one, none.
  std::unique_ptr<UploadStore> uploads;
  if (!state_dir.empty()) {
    auto opened = UploadStore::open(std::filesystem::path(state_dir) / "uploads", upload_limits);
    if (!opened.ok()) {
      std::fprintf(stderr, "pulsebox-http: %s\n", opened.error().to_string().c_str());
      return 1;
    }
    uploads = std::move(opened).value();
  }
  RunServiceOptions run_options{.state_dir = state_dir, .maxima = maxima, .find_upload = {}};
  if (uploads) {
    run_options.find_upload =
        [store = uploads.get()](
            const std::string& name) -> std::optional<RunServiceOptions::FoundUpload> {
      const auto hex = upload_hex(name);
      if (!hex) return std::nullopt;
      auto lease = store->acquire(*hex);
      if (!lease) return std::nullopt;
      const std::filesystem::path root = lease->root();
      return RunServiceOptions::FoundUpload{
          .root = root, .in_use = std::make_shared<const UploadLease>(std::move(*lease))};
    };
  }
  RunService runs(std::move(run_options));
  register_routes(*server.value(),
                  Services{.state_dir = state_dir, .runs = &runs, .uploads = uploads.get()});
  std::atomic_ref(running).store(server.value().get());
  if (stop_requested) server.value()->begin_shutdown();
  if (auto served = server.value()->serve(); !served.ok()) {
    std::fprintf(stderr, "pulsebox-http: %s\n", served.error().to_string().c_str());
    return 1;
  }
  return 0;
}
