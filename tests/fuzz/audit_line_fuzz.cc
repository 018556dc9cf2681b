// libFuzzer target: the audit log's line reader and entry parser read what
// anyone who can write the log wrote. They must never crash, never hold a
// line over the bound, and whatever they accept must be the line's own
// bytes: the hash at its end, a seq of 1 or more, a 64-hex prev.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "audit/chain.h"
#include "audit/line_reader.h"

namespace {

void check_entry(std::string_view text) {
  auto entry = pulsebox::audit::parse_entry(text);
  if (!entry.ok()) return;
  const auto& split = entry->split;
  if (entry->seq == 0 || entry->prev.size() != 64 || split.hash.size() != 64) std::abort();
  if (split.body.data() != text.data() || split.body.size() >= text.size()) std::abort();
  if (entry->keyed() != !entry->key_id.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check_entry(text);
  const int fd = ::memfd_create("audit-fuzz", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (::write(fd, data, size) == static_cast<ssize_t>(size)) {
    pulsebox::audit::LineReader reader(fd, 0);
    for (;;) {
      auto line = reader.next();
      if (!line.ok() || !*line) break;
      if ((*line)->text.size() > pulsebox::audit::kMaxLineBytes) std::abort();
      check_entry((*line)->text);
    }
  }
  ::close(fd);
  return 0;
}
