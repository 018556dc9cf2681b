// libFuzzer target: a transaction manifest or write-ahead log, as a hostile
// clone of a repository could plant one in .agent/transactions/.
// workspace::stream_entries must never crash, never hand over an entry that
// entry_problem refuses or one not after the last in path order (a reader
// that acts on each entry as it comes must meet each path once), and,
// whenever it accepts a file, agree with the
// whole-document reader (nlohmann's parse, then entry_from_json for each
// object of the array) about every entry and about the rest of the file.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "workspace/entry_stream.h"
#include "workspace/store_files.h"

namespace {

using nlohmann::json;
using pulsebox::workspace::Entry;

bool same(const Entry& a, const Entry& b) {
  const auto& s = a.snapshot;
  const auto& t = b.snapshot;
  return a.path == b.path && a.op == b.op && a.mode == b.mode && a.link_target == b.link_target &&
         a.blob == b.blob && a.size == b.size && a.blob_inode == b.blob_inode &&
         a.mtime_ns == b.mtime_ns && a.contains_secret == b.contains_secret &&
         a.base_blob == b.base_blob && a.base_link == b.base_link &&
         a.redacted_link == b.redacted_link && s.type == t.type && s.inode == t.inode &&
         s.device == t.device && s.size == t.size && s.mtime_ns == t.mtime_ns &&
         s.newest_ctime_ns == t.newest_ctime_ns && s.mode == t.mode && s.sha256 == t.sha256 &&
         s.changed_during_run == t.changed_during_run;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const int fd = ::memfd_create("transaction-file", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, 0) != 0) std::abort();
  if (size > 0 && ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) std::abort();
  if (::lseek(fd, 0, SEEK_SET) != 0) std::abort();
  std::vector<Entry> entries;
  auto streamed =
      pulsebox::workspace::stream_entries(fd, 1 << 20, "fuzz", "entries", [&](Entry&& entry) {
        if (!pulsebox::workspace::entry_problem(entry).empty()) std::abort();
        if (!entries.empty() && !(entries.back().path < entry.path)) std::abort();
        entries.push_back(std::move(entry));
      });
  if (!streamed.ok() || !*streamed || !(*streamed)->problem.empty()) return 0;
  // Accepted: the whole document, read the same way (a stream), agrees.
  std::istringstream text(std::string(reinterpret_cast<const char*>(data), size));
  json document;
  try {
    document = json::parse(text);
  } catch (const json::exception&) {
    std::abort();  // the stream accepted what the parser refuses
  }
  std::vector<Entry> expected;
  if (document.is_object() && document.contains("entries") && document["entries"].is_array()) {
    json kept = json::array();
    for (json& item : document["entries"]) {
      if (!item.is_object()) {
        kept.push_back(std::move(item));
        continue;
      }
      try {
        expected.push_back(pulsebox::workspace::entry_from_json(item));
      } catch (const json::exception&) {
        std::abort();  // an entry the stream took, the old reader refuses
      }
    }
    document["entries"] = std::move(kept);
  }
  if (entries.size() != expected.size()) std::abort();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!same(entries[i], expected[i])) std::abort();
  }
  if ((*streamed)->document != document) std::abort();
  return 0;
}
