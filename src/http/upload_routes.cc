// The routes of workspaces that travel (upload_routes.h).
#include "http/upload_routes.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive/workspace_archive.h"
#include "backends/native/staging.h"
#include "core/byte_names.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "core/text.h"
#include "http/changes_export.h"
#include "protocol/messages.h"
#include "pulsebox/workspace.h"

namespace pulsebox::http {
namespace {

namespace fs = std::filesystem;
using protocol::ErrorCode;
using protocol::ProtocolError;

constexpr const char* kUploadRoute = R"(/v1/workspaces/sha256:([0-9a-f]{64}))";

void fail(httplib::Response& response, ErrorCode code, const std::string& message,
          const std::string& field) {
  response.status = protocol::http_status(code);
  response.set_content(protocol::error_response({code, message, field, {}}), "application/json");
}

// A refused upload or export: hostile or damaged input is the caller's
// (400, naming the entry), a limit 413, anything else the server's.
void fail(httplib::Response& response, const core::Error& error, const std::string& field) {
  switch (error.kind()) {
    case core::ErrorKind::kResource:
      return fail(response, ErrorCode::TooLarge, error.message(), field);
    case core::ErrorKind::kSecurity:
    case core::ErrorKind::kInvalidInput:
      return fail(response, ErrorCode::InvalidField, field + ": " + error.message(), field);
    default:
      spdlog::error("{}: {}", field, error.to_string());
      return fail(response, ErrorCode::Internal, "the server failed: " + error.message(), field);
  }
}

// A directory the request works in, removed when it ends.
class Scratch {
 public:
  explicit Scratch(const fs::path& uploads)
      : path_(uploads / (".incoming-" + core::random_hex(16) + ".export")) {
    made_ = ::mkdir(path_.c_str(), 0700) == 0;
  }
  ~Scratch() {
    if (made_) backends::native::remove_tree(path_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  bool made() const { return made_; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  bool made_ = false;
};

void audit(const HttpServer& server, const ClientIdentity& client, std::string_view action,
           const std::string& target, std::string_view decision, const std::string& detail) {
  server.audit(AuditEvent{.client = client,
                          .action = action,
                          .target = target,
                          .decision = decision,
                          .detail = detail});
}

void receive(const HttpServer& server, UploadStore& uploads, const httplib::Request& request,
             httplib::Response& response, const ClientIdentity& client,
             const httplib::ContentReader& reader) {
  const std::string hex = request.matches[1].str();
  const std::string target = "sha256:" + hex;
  auto stored = uploads.receive(hex, [&](const archive::ArchiveSink& sink) {
    return reader([&](const char* data, std::size_t size) {
      return sink(std::string_view(data, size)).ok();
    });
  });
  if (!stored.ok()) {
    spdlog::info("upload sha256:{} from {} refused: {}", hex.substr(0, 12), client.describe(),
                 stored.error().message());
    audit(server, client, "http_upload", target, "refused", stored.error().message());
    // Its body may not have been read to the end.
    response.set_header("Connection", "close");
    return fail(response, stored.error(), "workspace_upload");
  }
  audit(server, client, "http_upload", target, "allow",
        std::to_string(stored.value().files) + " files, " + std::to_string(stored.value().bytes) +
            " bytes" + (stored.value().created ? "" : " (kept already)"));
  const std::size_t evicted = uploads.evict();
  spdlog::info("upload sha256:{} from {}: {} files, {} bytes{}{}", hex.substr(0, 12),
               client.describe(), stored.value().files, stored.value().bytes,
               stored.value().created ? "" : " (kept already)",
               evicted != 0 ? ", " + std::to_string(evicted) + " older upload(s) evicted" : "");
  const protocol::Json body = {{"v", protocol::kProtocolVersion},
                               {"workspace_upload", "sha256:" + hex},
                               {"files", stored.value().files},
                               {"bytes", stored.value().bytes}};
  response.status = stored.value().created ? 201 : 200;
  response.set_content(body.dump(), "application/json");
}

void export_changes(const HttpServer& server, UploadStore& uploads, const httplib::Request& request,
                    httplib::Response& response, const ClientIdentity& client) {
  auto parsed = core::parse_json(request.body, "the request");
  if (!parsed || !parsed.value().is_object()) {
    return fail(response, ErrorCode::InvalidRequest, "an export request is a JSON object", "");
  }
  const nlohmann::json& body = parsed.value();
  if (!body.contains("v") || body["v"] != protocol::kProtocolVersion) {
    return fail(
        response, ErrorCode::InvalidRequest,
        "v: this server speaks protocol version " + std::to_string(protocol::kProtocolVersion),
        "v");
  }
  for (const auto& [key, value] : body.items()) {
    if (key != "v" && key != "request" && key != "workspace_upload" && key != "transaction") {
      return fail(response, ErrorCode::InvalidField, key + ": unknown field", key);
    }
  }
  const auto hex = upload_hex(body.value("workspace_upload", ""));
  if (!hex) {
    return fail(response, ErrorCode::InvalidField,
                "workspace_upload: expected sha256:<64 lowercase hex digits>", "workspace_upload");
  }
  const std::string transaction = body.value("transaction", "");
  if (transaction.empty()) {
    return fail(response, ErrorCode::InvalidField, "transaction: missing: the transaction's id",
                "transaction");
  }
  auto lease = uploads.acquire(*hex);
  if (!lease) {
    return fail(response, ErrorCode::NotFound, "workspace_upload: no upload sha256:" + *hex,
                "workspace_upload");
  }
  const fs::path root = lease->root();
  if (!has_transaction(root, transaction)) {
    return fail(response, ErrorCode::NotFound,
                "transaction: no transaction \"" + core::escape_malformed_utf8(transaction) +
                    "\" of upload sha256:" + *hex,
                "transaction");
  }
  Scratch scratch(uploads.dir());
  if (!scratch.made()) {
    return fail(response, core::Error::from_errno("export", "a scratch directory"), "transaction");
  }
  const fs::path upper = scratch.path() / "upper";
  if (auto made = materialise_changes(root, transaction, upper); !made.ok()) {
    return fail(response, made.error(), "transaction");
  }
  // The archive goes to a file, not memory; unlinked, it lives as long as
  // the response reads it.
  const fs::path archive_path = scratch.path() / "changes.tar";
  auto archive = std::make_shared<core::UniqueFd>(
      ::open(archive_path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!*archive) {
    return fail(response, core::Error::from_errno("export", "the archive file"), "transaction");
  }
  ::unlink(archive_path.c_str());
  auto written = archive::write_tree_archive(upper, [&](std::string_view bytes) {
    return core::write_all(archive->get(), bytes, "the export");
  });
  if (!written.ok()) return fail(response, written.error(), "transaction");
  if (!written.value().skipped.empty()) {
    const auto& [path, why] = written.value().skipped.front();
    return fail(response, ErrorCode::Internal,
                "transaction: \"" + path + "\" could not be exported (" + why +
                    "); the transaction is kept",
                "transaction");
  }
  const off_t size = ::lseek(archive->get(), 0, SEEK_END);
  // The transaction goes once the client has it all, the upload held till then.
  auto held = std::make_shared<UploadLease>(std::move(*lease));
  response.set_content_provider(
      static_cast<std::size_t>(size), "application/x-tar",
      [archive](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
        char buffer[1 << 16];
        const ssize_t n = ::pread(archive->get(), buffer, std::min(length, sizeof buffer),
                                  static_cast<off_t>(offset));
        if (n <= 0) return false;
        return sink.write(buffer, static_cast<std::size_t>(n));
      },
      [&server, held, transaction, client, target = "sha256:" + *hex](bool success) {
        audit(server, client, "http_export", target + " " + transaction,
              success ? "allow" : "refused",
              success ? "sent; the transaction is discarded on the server"
                      : "not sent whole; the transaction is kept");
        if (!success) return;  // kept: the client may ask again
        try {
          Workspace(held->root()).discard(transaction);
        } catch (const std::exception& e) {
          spdlog::error("export: discarding {}: {}", transaction, e.what());
        }
      });
}

}  // namespace

void register_upload_routes(HttpServer& server, UploadStore& uploads) {
  server.get(kUploadRoute, [&uploads](const httplib::Request& request, httplib::Response& response,
                                      const ClientIdentity&) {
    const std::string hex = request.matches[1].str();
    if (!uploads.has(hex)) {
      return fail(response, ErrorCode::NotFound, "workspace_upload: no upload sha256:" + hex,
                  "workspace_upload");
    }
    const protocol::Json body = {{"v", protocol::kProtocolVersion},
                                 {"workspace_upload", "sha256:" + hex}};
    response.set_content(body.dump(), "application/json");
  });
  server.put_streaming(
      kUploadRoute,
      [&server, &uploads](const httplib::Request& request, httplib::Response& response,
                          const ClientIdentity& client, const httplib::ContentReader& reader) {
        receive(server, uploads, request, response, client, reader);
      });
  server.post("/v1/export",
              [&server, &uploads](const httplib::Request& request, httplib::Response& response,
                                  const ClientIdentity& client) {
                export_changes(server, uploads, request, response, client);
              });
}

}  // namespace pulsebox::http
