// Reading an audit log's lines from a descriptor with bounded memory: no
// line longer than kMaxLineBytes is ever held, however the file was made.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace pulsebox::audit {

struct Line {
  std::string_view text;    // without its newline
  std::uint64_t start = 0;  // byte offset of its first byte
  std::uint64_t end = 0;    // byte offset after its newline
  bool terminated = true;   // false: the file ends without a newline
};

// Reads forward from `offset` (pread: the descriptor's offset is not used).
class LineReader {
 public:
  LineReader(int fd, std::uint64_t offset) : fd_(fd), offset_(offset) {}

  // The next line, valid until the next call; nullopt at the end of the
  // file. An error of kind kResource for a line longer than the limit.
  core::Result<std::optional<Line>> next();

 private:
  int fd_;
  std::uint64_t offset_;  // file offset of buffer_[0]
  std::string buffer_;
  std::size_t pos_ = 0;
  std::size_t chunk_ = 4096;  // the next read's size (line_reader.cc)
  bool eof_ = false;
};

// The line that ends just before byte `end` (the byte at end - 1 must be its
// newline); reads at most kMaxLineBytes + 2 bytes back.
core::Result<Line> read_line_ending_at(int fd, std::uint64_t end, std::string& storage);

}  // namespace pulsebox::audit
