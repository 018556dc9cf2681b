#include "secrets/wrapped_base64.h"

#include <algorithm>
#include <cctype>

namespace pulsebox {

namespace {

bool is_base64_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '-' ||
         c == '_';
}

// Whether the line end whose '\n' is at `newline` joins the run before it
// to the one after it. `run_end` is where the line end starts.
bool joins(std::string_view text, std::size_t newline, std::size_t run_before,
           std::size_t& run_end) {
  run_end = newline > 0 && text[newline - 1] == '\r' ? newline - 1 : newline;
  if (newline + 1 >= text.size() || !is_base64_char(text[newline + 1])) return false;
  return run_ending_at(text, run_end, run_before) >= kMinWrappedRun;
}

}  // namespace

std::size_t WrappedBlock::text_offset(std::size_t at) const {
  const auto after =
      std::upper_bound(runs.begin(), runs.end(), at,
                       [](std::size_t value, const Run& run) { return value < run.joined; });
  const Run& run = *(after - 1);
  return run.text + (at - run.joined);
}

std::size_t run_ending_at(std::string_view text, std::size_t end, std::size_t run_before) {
  std::size_t start = end;
  while (start > 0 && is_base64_char(text[start - 1]))
    --start;
  return end - start + (start == 0 ? run_before : 0);
}

void for_each_wrapped_block(std::string_view text, std::size_t run_before,
                            const std::function<bool(const WrappedBlock&)>& visit) {
  std::size_t newline = text.find('\n');
  while (newline != std::string_view::npos) {
    std::size_t run_end = 0;
    if (!joins(text, newline, run_before, run_end)) {
      newline = text.find('\n', newline + 1);
      continue;
    }
    WrappedBlock block;
    const std::size_t run_start = run_end - run_ending_at(text, run_end, 0);
    block.runs.push_back({0, run_start});
    block.joined.append(text.substr(run_start, run_end - run_start));
    for (;;) {
      // The run after the line end, then whether another line end joins
      // it to the next one.
      const std::size_t next_start = newline + 1;
      std::size_t next_end = next_start;
      while (next_end < text.size() && is_base64_char(text[next_end]))
        ++next_end;
      block.runs.push_back({block.joined.size(), next_start});
      block.joined.append(text.substr(next_start, next_end - next_start));
      std::size_t next = next_end;
      if (next < text.size() && text[next] == '\r') ++next;
      if (next < text.size() && text[next] == '\n' && joins(text, next, run_before, run_end)) {
        newline = next;
        continue;
      }
      newline = text.find('\n', next_end);
      break;
    }
    if (!visit(block)) return;
  }
}

std::size_t longest_wrapped_span(std::size_t form_length) {
  // The first run may be cut short by where the match starts; each later
  // one holds at least kMinWrappedRun of its characters.
  return form_length + 2 * (1 + form_length / kMinWrappedRun);
}

}  // namespace pulsebox
