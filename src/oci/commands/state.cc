// `state`, `list` and `ps`.
#include <nlohmann/json.hpp>
#include <sstream>

#include "oci/cgroups.h"
#include "oci/commands/commands.h"
#include "oci/invalid_input.h"

namespace pulsebox::oci::commands {

core::Result<std::string> state(StateStore& store, std::string_view id) {
  PB_TRY(dir, store.open(id, false));
  PB_TRY(record, dir.read_record());
  return state_document(record, status_of(dir, record)).dump();
}

core::Result<std::string> list(StateStore& store, std::string_view format) {
  if (format != "table" && format != "json")
    return oci::invalid("--format " + std::string(format) + ": give table or json");
  auto documents = nlohmann::json::array();
  for (const auto& id : store.ids()) {
    auto dir = store.open(id, false);
    if (!dir) continue;  // removed meanwhile
    auto record = dir->read_record();
    if (!record) continue;  // a create killed before its record: reconcile's
    documents.push_back(state_document(*record, status_of(*dir, *record)));
  }
  if (format == "json") return documents.dump() + "\n";
  std::ostringstream out;
  out << "ID\tPID\tSTATUS\tBUNDLE\tCREATED\tOWNER\n";
  for (const auto& d : documents) {
    out << d["id"].get<std::string>() << '\t' << d["pid"].get<long>() << '\t'
        << d["status"].get<std::string>() << '\t' << d["bundle"].get<std::string>() << '\t'
        << d["created"].get<std::string>() << '\t' << d["owner"].get<std::string>() << '\n';
  }
  return out.str();
}

core::Result<std::string> processes(StateStore& store, std::string_view id,
                                    std::string_view format) {
  if (format != "table" && format != "json")
    return oci::invalid("--format " + std::string(format) + ": give table or json");
  PB_TRY(dir, store.open(id, false));
  PB_TRY(record, dir.read_record());
  const Status status = status_of(dir, record);
  if (status != Status::Created && status != Status::Running)
    return oci::invalid("container " + std::string(id) + " is not running");
  if (record.cgroup_leaves.empty())
    return core::Error(
        core::ErrorKind::kUnsupported, "oci",
        "ps: container " + std::string(id) + " has no cgroup to list its processes from");
  PB_TRY(pids, ContainerCgroup::from_record(record.cgroup_leaves).pids());
  if (format == "json") return nlohmann::json(pids).dump() + "\n";
  std::string text = "PID\n";
  for (const pid_t pid : pids)
    text += std::to_string(pid) + "\n";
  return text;
}

}  // namespace pulsebox::oci::commands
