#include "secrets/wrapped_base64.h"

#include <cctype>

namespace pulsebox {

namespace {

bool is_base64_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '-' ||
         c == '_';
}

// The line end at `newline` (the offset of its '\n') joins two runs: where
// the line end starts, and where the run before it starts.
struct Join {
  std::size_t run_start;
  std::size_t break_start;
};

bool find_join(std::string_view text, std::size_t newline, Join& join) {
  const std::size_t break_start = newline > 0 && text[newline - 1] == '\r' ? newline - 1 : newline;
  std::size_t run_start = break_start;
  while (run_start > 0 && is_base64_char(text[run_start - 1]))
    --run_start;
  if (break_start - run_start < kMinWrappedRun) return false;
  if (newline + 1 >= text.size() || !is_base64_char(text[newline + 1])) return false;
  join = {run_start, break_start};
  return true;
}

void append(std::string_view text, std::size_t from, std::size_t to, WrappedBlock& block) {
  for (std::size_t i = from; i < to; ++i) {
    block.joined.push_back(text[i]);
    block.where.push_back(i);
  }
}

}  // namespace

void for_each_wrapped_block(std::string_view text,
                            const std::function<void(const WrappedBlock&)>& visit) {
  std::size_t newline = text.find('\n');
  while (newline != std::string_view::npos) {
    Join join{};
    if (!find_join(text, newline, join)) {
      newline = text.find('\n', newline + 1);
      continue;
    }
    WrappedBlock block;
    append(text, join.run_start, join.break_start, block);
    for (;;) {
      // The run after the line end, then whether another line end joins it
      // to the next one.
      std::size_t run_end = newline + 1;
      while (run_end < text.size() && is_base64_char(text[run_end]))
        ++run_end;
      append(text, newline + 1, run_end, block);
      std::size_t next = run_end;
      if (next < text.size() && text[next] == '\r') ++next;
      if (next < text.size() && text[next] == '\n' && find_join(text, next, join)) {
        newline = next;
        continue;
      }
      newline = text.find('\n', run_end);
      break;
    }
    visit(block);
  }
}

std::size_t cut_keeping_runs_joinable(std::string_view text, std::size_t cut) {
  if (cut == 0 || cut >= text.size() || !is_base64_char(text[cut - 1]) ||
      !is_base64_char(text[cut]))
    return cut;
  const std::size_t limit = cut > kMinWrappedRun ? cut - kMinWrappedRun : 0;
  while (cut > limit && is_base64_char(text[cut - 1]))
    --cut;
  return cut;
}

std::size_t longest_wrapped_span(std::size_t form_length) {
  // The first run may be cut short by where the match starts; each later
  // one holds at least kMinWrappedRun of its characters.
  return form_length + 2 * (1 + form_length / kMinWrappedRun);
}

}  // namespace pulsebox
