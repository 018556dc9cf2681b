// Held changes (include/pulsebox/session.h): a run's changes that could not
// all be staged, kept on disk and recorded under .agent/held/ until the user
// drops them.

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/byte_names.h"
#include "core/fs.h"
#include "core/text.h"
#include "core/throw_error.h"
#include "pulsebox/error.h"
#include "workspace/layers.h"
#include "workspace/session_store.h"

namespace pulsebox {

namespace fs = std::filesystem;
using core::Error;
using core::ErrorKind;
using nlohmann::json;

namespace {

HeldChanges parse_held(const json& document) {
  HeldChanges held;
  held.id = document.at("id").get<std::string>();
  held.created = document.at("created").get<std::string>();
  held.origin = core::get_name(document, "origin");
  held.reason = document.at("reason").get<std::string>();
  held.location = document.at("location").get<std::string>();
  for (const auto& item : document.at("refused")) {
    held.refused.push_back({core::get_name(item, "path"), item.at("reason").get<std::string>()});
  }
  if (document.contains("transaction") && document["transaction"].is_string()) {
    held.transaction = document["transaction"].get<std::string>();
  }
  return held;
}

bool valid_held_id(const std::string& id) {
  return id.starts_with("held-") && id.size() <= 100 &&
         id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos;
}

}  // namespace

std::vector<HeldChanges> list_held(const Workspace& ws) {
  std::vector<HeldChanges> held;
  for (const auto& file : workspace::record_files(ws.agent_dir() / "held")) {
    auto document = workspace::read_record(file);
    HeldChanges entry;
    entry.id = file.stem().string();
    try {
      if (!document) {
        entry.reason = "damaged record: " + document.error().to_string();
      } else {
        entry = parse_held(*document);
        if (entry.id != file.stem().string()) {
          entry.reason = "damaged record: it names another id";
          entry.id = file.stem().string();
        }
      }
    } catch (const nlohmann::json::exception& error) {
      entry.reason = std::string("damaged record: ") + error.what();
    }
    held.push_back(std::move(entry));
  }
  return held;
}

void discard_held(const Workspace& ws, const std::string& id, const fs::path& kept_dir) {
  if (!valid_held_id(id)) {
    throw SandboxConfigError("not a held id: " + core::quote_name(id), 0, "held");
  }
  const auto file = ws.agent_dir() / "held" / (id + ".json");
  auto read = workspace::read_record(file);
  if (!read) {
    throw SandboxConfigError(
        "no held changes \"" + id + "\" (see `pulsebox changes`): " + read.error().to_string(), 0,
        "held");
  }
  const nlohmann::json document = std::move(read).value();
  HeldChanges held;
  try {
    held = parse_held(document);
  } catch (const nlohmann::json::exception& error) {
    throw SandboxConfigError(file.string() + ": " + error.what(), 0, "held");
  }
  if (held.location.filename() != id) {
    throw SandboxSecurityError(file.string() + ": its location is not its own", 0, "held");
  }
  core::check_or_throw(workspace::check_kept_location(held.location, "held-", kept_dir));
  core::check_or_throw(workspace::remove_layer_tree(held.location));
  if (::unlink(file.c_str()) != 0 && errno != ENOENT) {
    core::throw_error(core::Error::from_errno("held", "removing " + file.string()));
  }
}

void record_held(const Workspace& ws, const HeldChanges& held) {
  core::check_or_throw(workspace::ensure_agent_subdir(ws, "held"));
  nlohmann::json refused = nlohmann::json::array();
  for (const auto& item : held.refused) {
    nlohmann::json entry = {{"reason", item.reason}};
    core::put_name(entry, "path", item.path);
    refused.push_back(std::move(entry));
  }
  nlohmann::json document = {
      {"version", 1},
      {"id", held.id},
      {"created", held.created},
      {"reason", held.reason},
      {"location", held.location.string()},
      {"refused", std::move(refused)},
      {"transaction", held.transaction ? nlohmann::json(*held.transaction) : nlohmann::json()}};
  core::put_name(document, "origin", held.origin);
  core::check_or_throw(core::write_file_atomic(ws.agent_dir() / "held" / (held.id + ".json"),
                                               document.dump(2) + "\n", 0600));
}

}  // namespace pulsebox
