#include "audit/line_reader.h"

#include <unistd.h>

#include <algorithm>

#include "audit/chain.h"

namespace pulsebox::audit {

using core::Error;
using core::ErrorKind;

namespace {

// Reads start at a page and double: most readers (every writer, at the
// anchor) find the end of the file at once, and zeroing a whole chunk for
// that showed in every run.
constexpr std::size_t kChunk = 64 * 1024;

core::Result<std::size_t> pread_some(int fd, char* data, std::size_t size, std::uint64_t at) {
  for (;;) {
    const ssize_t got = ::pread(fd, data, size, static_cast<off_t>(at));
    if (got >= 0) return static_cast<std::size_t>(got);
    if (errno != EINTR) return Error::from_errno("audit", "reading the log");
  }
}

Error too_long() {
  return Error(ErrorKind::kResource, "audit", "longer than 1 MiB: not an audit entry");
}

}  // namespace

core::Result<std::optional<Line>> LineReader::next() {
  for (;;) {
    const std::string_view pending = std::string_view(buffer_).substr(pos_);
    const std::size_t newline = pending.find('\n');
    if (newline != std::string_view::npos) {
      if (newline > kMaxLineBytes) return too_long();
      Line line{pending.substr(0, newline), offset_ + pos_, offset_ + pos_ + newline + 1, true};
      pos_ += newline + 1;
      return std::optional<Line>(line);
    }
    if (pending.size() > kMaxLineBytes) return too_long();
    if (eof_) {
      if (pending.empty()) return std::optional<Line>();
      Line line{pending, offset_ + pos_, offset_ + buffer_.size(), false};
      pos_ = buffer_.size();
      return std::optional<Line>(line);
    }
    // Drop what was consumed, then read one more chunk.
    buffer_.erase(0, pos_);
    offset_ += pos_;
    pos_ = 0;
    const std::size_t had = buffer_.size();
    const std::size_t chunk = chunk_;
    chunk_ = std::min(chunk_ * 2, kChunk);
    buffer_.resize(had + chunk);
    auto got = pread_some(fd_, buffer_.data() + had, chunk, offset_ + had);
    if (!got.ok()) return std::move(got).error();
    buffer_.resize(had + *got);
    eof_ = *got == 0;
  }
}

core::Result<Line> read_line_ending_at(int fd, std::uint64_t end, std::string& storage) {
  if (end == 0) return Error(ErrorKind::kInvalidInput, "audit", "no line ends at byte 0");
  // Read back in growing windows: a record is usually a few hundred bytes,
  // and every writer reads the tip (reading a whole megabyte each time
  // showed in every run). At most the line, its newline and the one before.
  const std::uint64_t largest = std::min<std::uint64_t>(end, kMaxLineBytes + 2);
  std::uint64_t window = std::min<std::uint64_t>(largest, 4096);
  for (;;) {
    const std::uint64_t start = end - window;
    storage.assign(static_cast<std::size_t>(window), '\0');
    std::size_t filled = 0;
    while (filled < storage.size()) {
      auto got = pread_some(fd, storage.data() + filled, storage.size() - filled, start + filled);
      if (!got.ok()) return std::move(got).error();
      if (*got == 0) break;
      filled += *got;
    }
    if (filled != storage.size() || storage.back() != '\n') {
      return Error(ErrorKind::kInvalidInput, "audit",
                   "no complete line ends at byte " + std::to_string(end));
    }
    std::string_view view(storage);
    view.remove_suffix(1);
    const std::size_t newline = view.rfind('\n');
    if (newline != std::string_view::npos || start == 0) {
      const std::size_t first = newline == std::string_view::npos ? 0 : newline + 1;
      return Line{view.substr(first), start + first, end, true};
    }
    if (window == largest) return too_long();
    window = std::min(window * 16, largest);
  }
}

}  // namespace pulsebox::audit
