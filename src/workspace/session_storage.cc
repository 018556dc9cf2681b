// Whose a session's storage is (session_storage.h).

#include "workspace/session_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string_view>

#include "core/fs.h"
#include "core/unique_fd.h"
#include "pulsebox/error.h"
#include "pulsebox/session.h"
#include "workspace/layers.h"
#include "workspace/session_store.h"
#include "workspace/tree.h"

namespace pulsebox::workspace {

namespace fs = std::filesystem;
using core::Error;
using core::ErrorKind;
using core::UniqueFd;

namespace {

constexpr const char* kOwnerFile = "owner";
constexpr std::string_view kWorkspaceLine = "workspace ";
constexpr std::string_view kSessionLine = "\nsession ";
constexpr std::size_t kMaxOwnerBytes = 8192;

// The owner file's text; empty when there is none or it is not a regular
// file of pulsebox's size.
std::string read_owner(const fs::path& storage, bool* missing) {
  *missing = false;
  UniqueFd dir(::open(storage.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) {
    *missing = true;
    return "";
  }
  UniqueFd file(::openat(dir.get(), kOwnerFile, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!file) {
    *missing = errno == ENOENT;
    return "";
  }
  struct stat st {};
  if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  std::string content(kMaxOwnerBytes, '\0');
  const ssize_t got = ::read(file.get(), content.data(), content.size());
  content.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  return content;
}

}  // namespace

std::string owner_stamp(const Workspace& ws, const std::string& name) {
  return std::string(kWorkspaceLine) + ws.root().string() + std::string(kSessionLine) + name + "\n";
}

core::Status write_owner(const fs::path& storage, const std::string& stamp) {
  return core::write_file_atomic(storage / kOwnerFile, stamp, 0600);
}

StorageOwner storage_owner(const fs::path& storage, const std::string& stamp) {
  bool missing = false;
  const std::string content = read_owner(storage, &missing);
  if (missing) return StorageOwner::kUnstated;
  return !stamp.empty() && content == stamp ? StorageOwner::kThisSession : StorageOwner::kAnother;
}

bool still_used_by_its_owner(const fs::path& storage) {
  bool missing = false;
  const std::string content = read_owner(storage, &missing);
  const std::size_t split = content.rfind(kSessionLine);
  if (!content.starts_with(kWorkspaceLine) || !content.ends_with('\n') ||
      split == std::string::npos || split < kWorkspaceLine.size()) {
    return true;
  }
  const fs::path root = content.substr(kWorkspaceLine.size(), split - kWorkspaceLine.size());
  const std::size_t name_at = split + kSessionLine.size();
  const std::string name = content.substr(name_at, content.size() - 1 - name_at);
  if (!check_session_name(name).empty()) return true;
  auto record = read_record(root / ".agent" / "sessions" / (name + ".json"));
  if (!record) return record.error().error_number() != ENOENT;
  const auto named = record->find("storage");
  return named == record->end() || !named->is_string() ||
         named->get<std::string>() == storage.string();
}

core::Status remove_storage(const fs::path& storage) {
  UniqueFd dir(::open(storage.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) {
    if (errno == ENOENT) return core::ok_status();
    return Error::from_errno("session", "open " + storage.string());
  }
  for (const std::string& name : list_directory(dir.get())) {
    if (name != kOwnerFile) PB_CHECK(remove_layer_tree(storage / name));
  }
  return remove_layer_tree(storage);
}

}  // namespace pulsebox::workspace
