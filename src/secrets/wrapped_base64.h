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

// One block: its characters with the line ends left out, and where each
// of its runs starts in the joined string and in the text.
struct WrappedBlock {
  struct Run {
    std::size_t joined;
    std::size_t text;
  };
  std::string joined;
  std::vector<Run> runs;

  // The offset in the text of the joined string's character `at`.
  std::size_t text_offset(std::size_t at) const;
};

// Calls `visit` for each block of `text` in which line ends ("\n" or
// "\r\n") join runs of base64 characters (either alphabet), in order; it
// stops early when `visit` returns false. `run_before` is how many base64
// characters came right before `text` in the run it starts with (a
// stream's carry: what was emitted of that run), so that a stream joins
// exactly the line ends the whole text does.
void for_each_wrapped_block(std::string_view text, std::size_t run_before,
                            const std::function<bool(const WrappedBlock&)>& visit);

// The length of the run of base64 characters that ends at `end` in
// `text`, counting `run_before` when it reaches the start.
std::size_t run_ending_at(std::string_view text, std::size_t end, std::size_t run_before);

// The most bytes a match of `form_length` base64 characters can span in
// the text when line ends are taken out between its runs.
std::size_t longest_wrapped_span(std::size_t form_length);

}  // namespace pulsebox
