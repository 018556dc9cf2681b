#include "core/json_parse.h"

#include <unistd.h>

#include <cerrno>
#include <istream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <streambuf>

#include "core/fs.h"
#include "core/text.h"

namespace pulsebox::core {

namespace {

// nlohmann's message without its "[json.exception.NAME.NNN] " prefix.
std::string without_exception_id(const nlohmann::json::exception& error) {
  std::string what = error.what();
  if (auto cut = what.find("] "); cut != std::string::npos) what = what.substr(cut + 2);
  return what;
}

// Hands the parser what `fd` reads, a buffer at a time, and stops (as the
// end of input, with `failure` set) at a read error or past `limit` bytes.
class BoundedFdBuffer : public std::streambuf {
 public:
  BoundedFdBuffer(int fd, std::uint64_t limit, std::string_view source)
      : fd_(fd), limit_(limit), source_(source) {}

  // Bytes the parser has taken so far.
  std::uint64_t consumed() const { return total_ - static_cast<std::uint64_t>(egptr() - gptr()); }
  const std::optional<Error>& failure() const { return failure_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (failure_) return traits_type::eof();
    ssize_t n;
    do {
      n = ::read(fd_, buffer_, sizeof buffer_);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      failure_ = Error::from_errno("io", "reading " + source_);
      return traits_type::eof();
    }
    if (n == 0) return traits_type::eof();
    if (total_ + static_cast<std::uint64_t>(n) > limit_) {
      failure_ =
          Error(ErrorKind::kResource, "io",
                source_ + " is larger than the limit of " + std::to_string(limit_) + " bytes");
      return traits_type::eof();
    }
    total_ += static_cast<std::uint64_t>(n);
    setg(buffer_, buffer_, buffer_ + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  int fd_;
  std::uint64_t limit_;
  std::string source_;
  std::uint64_t total_ = 0;
  std::optional<Error> failure_;
  char buffer_[1 << 16];
};

// Thrown by the depth check out of the parser's callback.
struct NestedTooDeep {};

}  // namespace

JsonNesting json_nesting(std::string_view text, std::size_t limit) {
  JsonNesting nesting;
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, which may be a quote
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        ++depth;
        if (depth > nesting.depth) {
          nesting.depth = depth;
          if (depth == limit + 1) nesting.offset_past_limit = i;
        }
        break;
      case ']':
      case '}':
        // An unmatched closer is a syntax error the parser reports.
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return nesting;
}

namespace {

// The parser's callback for the streaming parsers: each object of the
// top-level array `stream_key` goes to `each` (when given) instead of into
// the document; an array or object opened deeper than `max_depth` throws
// NestedTooDeep (`depth` at its start is the number of
// those it opens in). Events at depth 1 are the top-level object's keys
// and values; an object ending at depth 2 is an element of one of its
// arrays.
nlohmann::json::parser_callback_t streaming_callback(
    std::string_view stream_key, const std::function<void(nlohmann::json&)>& each,
    std::size_t max_depth) {
  return [stream_key, &each, max_depth, in_array = false](
             int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) mutable {
    using Event = nlohmann::json::parse_event_t;
    if ((event == Event::object_start || event == Event::array_start) &&
        static_cast<std::size_t>(depth) + 1 > max_depth) {
      throw NestedTooDeep{};
    }
    if (!each) return true;
    if (depth == 1 && event == Event::key) in_array = parsed == stream_key;
    if (depth == 2 && event == Event::object_end && in_array) {
      each(parsed);
      return false;  // handed over: not kept in the document
    }
    return true;
  };
}

}  // namespace

Result<nlohmann::json> parse_json(std::string_view text, std::string_view source,
                                  std::size_t max_depth) {
  return parse_json_streaming(text, source, {}, {}, max_depth);
}

Result<nlohmann::json> parse_json_streaming(std::string_view text, std::string_view source,
                                            std::string_view stream_key,
                                            const std::function<void(nlohmann::json&)>& each,
                                            std::size_t max_depth) {
  const std::string name(source);
  if (const JsonNesting nesting = json_nesting(text, max_depth); nesting.depth > max_depth) {
    const TextPosition at = position_of_offset(text, nesting.offset_past_limit);
    return Error(ErrorKind::kInvalidInput, "json",
                 name + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                     ": JSON nested " + std::to_string(nesting.depth) +
                     " levels deep, over the limit of " + std::to_string(max_depth) +
                     " (this document needs only a few)");
  }
  try {
    if (!each) return nlohmann::json::parse(text.begin(), text.end());
    // The depth was checked above, over the whole text.
    return nlohmann::json::parse(
        text.begin(), text.end(),
        streaming_callback(stream_key, each, std::numeric_limits<std::size_t>::max()));
  } catch (const nlohmann::json::parse_error& error) {
    const TextPosition at = position_of_offset(text, error.byte > 0 ? error.byte - 1 : 0);
    std::string what = error.what();
    // nlohmann prefixes "[json.exception.parse_error.101] parse error at line 1, column 2: ".
    if (auto cut = what.find("syntax error"); cut != std::string::npos) what = what.substr(cut);
    return Error(ErrorKind::kInvalidInput, "json",
                 name + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                     ": invalid JSON: " + what);
  } catch (const nlohmann::json::out_of_range&) {
    // A number too large for any C++ type (found by the fuzzer).
    return Error(ErrorKind::kInvalidInput, "json",
                 name + ": invalid JSON: a number is out of range");
  } catch (const nlohmann::json::exception& error) {
    const std::string what = without_exception_id(error);
    return Error(ErrorKind::kInvalidInput, "json", name + ": invalid JSON: " + what);
  }
}

Result<nlohmann::json> parse_json_fd_streaming(int fd, std::uint64_t max_bytes,
                                               std::string_view source, std::string_view stream_key,
                                               const std::function<void(nlohmann::json&)>& each,
                                               std::size_t max_depth) {
  const std::string name(source);
  // A document that fails is read again as text, for parse_json's exact
  // diagnostics (line, column, the whole depth): rare, and bounded.
  const off_t start = ::lseek(fd, 0, SEEK_CUR);
  const auto diagnosed = [&](Error fallback) -> Error {
    if (start < 0 || ::lseek(fd, start, SEEK_SET) != start) return fallback;
    auto text = read_all(fd, max_bytes, name);
    if (!text) return std::move(text).error();
    auto again = parse_json_streaming(
        *text, source, stream_key, [](nlohmann::json&) {}, max_depth);
    return again.ok() ? fallback : std::move(again).error();
  };
  BoundedFdBuffer buffer(fd, max_bytes, source);
  std::istream input(&buffer);
  try {
    nlohmann::json document =
        nlohmann::json::parse(input, streaming_callback(stream_key, each, max_depth));
    // Input past the limit may have ended the text early but cleanly.
    if (buffer.failure()) return *buffer.failure();
    return document;
  } catch (const NestedTooDeep&) {
    return diagnosed(Error(ErrorKind::kInvalidInput, "json",
                           name + ": JSON nested over " + std::to_string(max_depth) +
                               " levels deep at byte " + std::to_string(buffer.consumed()) +
                               ", over the limit (this document needs only a few)"));
  } catch (const nlohmann::json::parse_error& error) {
    if (buffer.failure()) return *buffer.failure();
    const std::string what = without_exception_id(error);
    return diagnosed(Error(ErrorKind::kInvalidInput, "json", name + ": invalid JSON: " + what));
  } catch (const nlohmann::json::out_of_range&) {
    return Error(ErrorKind::kInvalidInput, "json",
                 name + ": invalid JSON: a number is out of range");
  } catch (const nlohmann::json::exception& error) {
    const std::string what = without_exception_id(error);
    return diagnosed(Error(ErrorKind::kInvalidInput, "json", name + ": invalid JSON: " + what));
  }
}

Result<bool> sax_parse_fd(int fd, std::uint64_t max_bytes, std::string_view source,
                          nlohmann::json_sax<nlohmann::json>& handler) {
  BoundedFdBuffer buffer(fd, max_bytes, source);
  std::istream input(&buffer);
  bool parsed = false;
  try {
    parsed = nlohmann::json::sax_parse(input, &handler);
  } catch (const nlohmann::json::exception&) {
    parsed = false;
  }
  // Input past the limit may have ended the text early but cleanly.
  if (buffer.failure()) return *buffer.failure();
  return parsed;
}

}  // namespace pulsebox::core
