// A transaction file (manifest, write-ahead log) read as its text is parsed:
// each object of the top-level array `key` becomes an Entry handed to
// `each` straight from the parser's events, never a JSON document first
// (at 100,000 entries building and taking apart those documents was most
// of loading a manifest). Everything else in the file becomes the returned
// document, the array kept without the entry objects, as
// core::parse_json_fd_streaming would give it.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "workspace/transactions.h"

namespace pulsebox::workspace {

struct EntryStream {
  nlohmann::json document;  // what the file holds but the entries
  // Set when the file parsed but an entry could not be used (a missing key,
  // a value of the wrong type, entry_problem()): why.
  std::string problem;
};

// Reads `fd` (at most `max_bytes`; more, or a read error, is an error).
// The stream when the text parsed, its `problem` set if an entry could not
// be used, the entries are not in strictly increasing path order (as
// pulsebox writes them: so `each` sees each path once, in order) or the
// top-level object has `key` twice; nullopt when the text's syntax or
// depth stopped the parse, for the caller to read it again for the diagnostic
// (core::parse_json_fd_streaming). `each` has seen the entries before a
// problem: callers drop what they gathered when the file is unusable.
core::Result<std::optional<EntryStream>> stream_entries(int fd, std::uint64_t max_bytes,
                                                        const std::string& source,
                                                        std::string_view key,
                                                        const std::function<void(Entry&&)>& each);

}  // namespace pulsebox::workspace
