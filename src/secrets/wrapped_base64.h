// Base64 wrapped over lines, as base64(1) (76 columns) and openssl (64)
// print it: the scrubber looks for a registered value's base64 forms in
// each block with its line ends taken out. Internal to the scrubber.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace pulsebox {

// A line end joins two runs of base64 characters only when the run before
// it is at least this long: encoders wrap at 60 columns or more, and the
// end of an ordinary line of prose is rarely such a run.
inline constexpr std::size_t kMinWrappedRun = 16;

struct WrappedBlock {
  std::string joined;              // the block's characters, line ends left out
  std::vector<std::size_t> where;  // each one's offset in the text
};

// Calls `visit` for each block of `text` in which line ends ("\n" or
// "\r\n") join runs of base64 characters (either alphabet), in order.
void for_each_wrapped_block(std::string_view text,
                            const std::function<void(const WrappedBlock&)>& visit);

// Where a stream may cut `text` at or before `cut` so that the rest it
// keeps holds the run of base64 characters `cut` falls in whole, or at
// least kMinWrappedRun of it: whether a line end joins the run to the
// next line depends on the run's length.
std::size_t cut_keeping_runs_joinable(std::string_view text, std::size_t cut);

// The most bytes a match of `form_length` base64 characters can span in
// the text when line ends are taken out between its runs.
std::size_t longest_wrapped_span(std::size_t form_length);

}  // namespace pulsebox
