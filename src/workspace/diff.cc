#include "workspace/diff.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <span>
#include <unordered_set>
#include <vector>

#include "core/text.h"

namespace pulsebox::workspace {
namespace {

// The only escape sequences a diff of ours holds: each painted line starts
// with one of these and ends with kReset.
constexpr std::string_view kBold = "\033[1m";
constexpr std::string_view kCyan = "\033[36m";
constexpr std::string_view kRed = "\033[31m";
constexpr std::string_view kGreen = "\033[32m";
constexpr std::string_view kReset = "\033[0m";

// Past this many differing lines the O(N*D) search is cut short and the
// middle section is shown as one replacement; the diff stays correct, just
// less minimal.
constexpr std::size_t kMaxEditDistance = 4000;
constexpr std::size_t kContext = 3;

// Lines keep their '\n', so "x" and "x\n" compare different.
std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;
    lines.push_back(text.substr(start, end - start));
    start = end;
  }
  return lines;
}

enum class Op { Keep, Delete, Insert };

// The part of two line lists a search has to look at: what is left after
// their common prefix and suffix.
struct Middle {
  std::size_t prefix = 0;
  std::size_t suffix = 0;
  std::span<const std::string_view> a;  // a's lines between them
  std::span<const std::string_view> b;  // b's lines between them
};

Middle middle_of(const std::vector<std::string_view>& a, const std::vector<std::string_view>& b) {
  Middle middle;
  while (middle.prefix < a.size() && middle.prefix < b.size() &&
         a[middle.prefix] == b[middle.prefix]) {
    ++middle.prefix;
  }
  while (middle.suffix < a.size() - middle.prefix && middle.suffix < b.size() - middle.prefix &&
         a[a.size() - 1 - middle.suffix] == b[b.size() - 1 - middle.suffix]) {
    ++middle.suffix;
  }
  middle.a = std::span(a).subspan(middle.prefix, a.size() - middle.prefix - middle.suffix);
  middle.b = std::span(b).subspan(middle.prefix, b.size() - middle.prefix - middle.suffix);
  return middle;
}

// Myers' greedy forward search from a to b: calls on_step(d, v, offset)
// before each step d (v[k + offset]: the furthest x reached on diagonal k)
// and returns the length D of a shortest edit script, or -1 if it is longer
// than limit. Only the current row of x values is kept: O(n + m).
template <typename OnStep>
long forward_search(std::span<const std::string_view> a, std::span<const std::string_view> b,
                    long limit, OnStep&& on_step) {
  const long n = static_cast<long>(a.size());
  const long m = static_cast<long>(b.size());
  if (n == 0 || m == 0) return n + m <= limit ? n + m : -1;  // all deleted or all inserted
  const long max = std::min(n + m, limit);
  const long offset = max + 1;
  std::vector<long> v(static_cast<std::size_t>(2 * max + 3), 0);
  for (long d = 0; d <= max; ++d) {
    on_step(d, v, offset);
    for (long k = -d; k <= d; k += 2) {
      long x;
      if (k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1])) {
        x = v[offset + k + 1];
      } else {
        x = v[offset + k - 1] + 1;
      }
      long y = x - k;
      while (x < n && y < m && a[static_cast<std::size_t>(x)] == b[static_cast<std::size_t>(y)]) {
        ++x;
        ++y;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) return d;
    }
  }
  return -1;
}

// forward_search's on_step when only the distance is wanted.
constexpr auto kNoTrace = [](long, const std::vector<long>&, long) {};

// The lines of a and b that the other side has too, with where each is. A
// line found on one side only cannot be kept, so it is an edit in every
// script: only the shared lines need a search (as git's xdiff does), and a
// rewritten file needs none.
struct SharedLines {
  std::vector<std::string_view> a, b;
  std::vector<std::size_t> a_at, b_at;  // their indexes in the whole a and b
  long unmatched = 0;                   // the lines of a and b left out
};

SharedLines shared_lines(std::span<const std::string_view> a, std::span<const std::string_view> b) {
  const std::unordered_set<std::string_view> in_a(a.begin(), a.end());
  const std::unordered_set<std::string_view> in_b(b.begin(), b.end());
  SharedLines shared;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!in_b.contains(a[i])) continue;
    shared.a.push_back(a[i]);
    shared.a_at.push_back(i);
  }
  for (std::size_t j = 0; j < b.size(); ++j) {
    if (!in_a.contains(b[j])) continue;
    shared.b.push_back(b[j]);
    shared.b_at.push_back(j);
  }
  shared.unmatched = static_cast<long>(a.size() - shared.a.size() + b.size() - shared.b.size());
  return shared;
}

// The length of a shortest edit script of the shared lines, or -1 when the
// whole script (the unmatched lines too) is longer than kMaxEditDistance.
long shared_distance(const SharedLines& shared) {
  const long limit = static_cast<long>(kMaxEditDistance);
  if (shared.unmatched > limit) return -1;
  return forward_search(shared.a, shared.b, limit - shared.unmatched, kNoTrace);
}

// The length of a shortest edit script from a to b, or -1 past
// kMaxEditDistance: edit_script's length, without its trace.
long edit_distance(std::span<const std::string_view> a, std::span<const std::string_view> b) {
  const SharedLines shared = shared_lines(a, b);
  const long searched = shared_distance(shared);
  return searched < 0 ? -1 : shared.unmatched + searched;
}

// The pairs (index in a, index in b) a shortest script of the shared lines
// keeps, in order. Myers' O((N+M)D) search, its length D known first
// (shared_distance), keeping for each step d only the diagonals -d-1..d+1
// the walk back reads (as 32-bit values): about 4*D*D bytes, at most 64 MB
// at kMaxEditDistance.
std::vector<std::pair<std::size_t, std::size_t>> kept_pairs(const SharedLines& shared,
                                                            long distance) {
  std::vector<std::pair<std::size_t, std::size_t>> kept;
  const long n = static_cast<long>(shared.a.size());
  const long m = static_cast<long>(shared.b.size());
  if (n == 0 || m == 0) return kept;  // nothing can be kept (no trace either)
  // trace[d][k + d + 1]: the furthest x on diagonal k before step d.
  std::vector<std::vector<std::int32_t>> trace;
  trace.reserve(static_cast<std::size_t>(distance) + 1);
  forward_search(shared.a, shared.b, distance,
                 [&](long d, const std::vector<long>& v, long offset) {
                   trace.emplace_back(v.begin() + (offset - d - 1), v.begin() + (offset + d + 2));
                 });
  auto at = [&](long d, long k) -> long {
    return trace[static_cast<std::size_t>(d)][static_cast<std::size_t>(k + d + 1)];
  };
  long x = n;
  long y = m;
  for (long d = distance; d >= 0; --d) {
    const long k = x - y;
    long prev_k;
    if (k == -d || (k != d && at(d, k - 1) < at(d, k + 1))) {
      prev_k = k + 1;
    } else {
      prev_k = k - 1;
    }
    const long prev_x = at(d, prev_k);
    const long prev_y = prev_x - prev_k;
    while (x > prev_x && y > prev_y) {
      --x;
      --y;
      kept.emplace_back(shared.a_at[static_cast<std::size_t>(x)],
                        shared.b_at[static_cast<std::size_t>(y)]);
    }
    x = prev_x;
    y = prev_y;
  }
  std::reverse(kept.begin(), kept.end());
  return kept;
}

// A shortest edit script from a to b: their common prefix and suffix kept,
// the middle's kept lines from a search of the lines both sides have, and
// between two kept lines first every line of a deleted, then every line of
// b inserted. Past kMaxEditDistance the middle is shown replaced, without
// any search.
std::vector<Op> edit_script(const std::vector<std::string_view>& a,
                            const std::vector<std::string_view>& b) {
  const Middle mid = middle_of(a, b);
  std::vector<Op> script(mid.prefix, Op::Keep);
  // The trace's x values must fit 32 bits.
  const bool searchable = mid.a.size() + mid.b.size() <
                          static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max());
  const SharedLines shared = searchable ? shared_lines(mid.a, mid.b) : SharedLines{};
  const long distance = searchable ? shared_distance(shared) : -1;
  std::vector<std::pair<std::size_t, std::size_t>> kept;
  if (distance >= 0) kept = kept_pairs(shared, distance);
  std::size_t i = 0;
  std::size_t j = 0;
  auto edits_up_to = [&](std::size_t a_end, std::size_t b_end) {
    script.insert(script.end(), a_end - i, Op::Delete);
    script.insert(script.end(), b_end - j, Op::Insert);
  };
  for (const auto& [a_index, b_index] : kept) {
    edits_up_to(a_index, b_index);
    script.push_back(Op::Keep);
    i = a_index + 1;
    j = b_index + 1;
  }
  edits_up_to(mid.a.size(), mid.b.size());
  script.insert(script.end(), mid.suffix, Op::Keep);
  return script;
}

std::string range(std::size_t start, std::size_t count) {
  // GNU/git convention: an empty range names the line before it.
  if (count == 0) return std::to_string(start == 0 ? 0 : start - 1) + ",0";
  if (count == 1) return std::to_string(start);
  return std::to_string(start) + "," + std::to_string(count);
}

struct Painter {
  bool colour;
  std::string line(std::string_view text, std::string_view code) const {
    if (!colour) return std::string(text) + "\n";
    return std::string(code) + std::string(text) + std::string(kReset) + "\n";
  }
};

std::string octal_mode(unsigned mode) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "%06o", mode);
  return buffer;
}

}  // namespace

bool looks_binary(std::string_view bytes) {
  // git's heuristic: a NUL byte in the first 8000 bytes.
  return bytes.substr(0, 8000).find('\0') != std::string_view::npos;
}

namespace {

// A side not shown stands for nothing either way: the change is binary only
// when nothing can be shown, or what can be looks binary. Calling the whole
// change binary for a side not shown hid the text of the other.
bool shown_as_binary(const DiffSide& before, const DiffSide& after) {
  if (before.unshown && after.unshown) return true;
  return (!before.unshown && looks_binary(before.content)) ||
         (!after.unshown && looks_binary(after.content));
}

}  // namespace

LineCounts count_changed_lines(const DiffSide& before, const DiffSide& after) {
  LineCounts counts;
  if (before.unshown || after.unshown) {
    counts.not_shown = before.unshown ? (after.unshown ? "both" : "before") : "after";
    if (shown_as_binary(before, after)) {
      counts.binary = true;
    } else if (before.unshown) {
      counts.added = split_lines(after.content).size();
    } else {
      counts.removed = split_lines(before.content).size();
    }
    return counts;
  }
  if (looks_binary(before.content) || looks_binary(after.content)) {
    counts.binary = before.content != after.content;
    return counts;
  }
  const std::vector<std::string_view> a = split_lines(before.content);
  const std::vector<std::string_view> b = split_lines(after.content);
  // The counts of edit_script's Inserts and Deletes without its trace: a
  // shortest script of length D deletes (D + n - m) / 2 lines and inserts
  // (D - n + m) / 2; past the search's limit it replaces the whole middle.
  const Middle mid = middle_of(a, b);
  const long n = static_cast<long>(mid.a.size());
  const long m = static_cast<long>(mid.b.size());
  const long distance = edit_distance(mid.a, mid.b);
  if (distance < 0) {
    counts.removed = static_cast<std::uint64_t>(n);
    counts.added = static_cast<std::uint64_t>(m);
  } else {
    counts.removed = static_cast<std::uint64_t>((distance + n - m) / 2);
    counts.added = static_cast<std::uint64_t>((distance - n + m) / 2);
  }
  return counts;
}

std::string diff_header(const std::string& path) {
  return "diff --git " + core::quote_name("a/" + path) + " " + core::quote_name("b/" + path);
}

std::string escape_diff_for_terminal(std::string_view diff) {
  std::string out;
  out.reserve(diff.size());
  std::size_t start = 0;
  while (start < diff.size()) {
    std::size_t end = diff.find('\n', start);
    if (end == std::string_view::npos) end = diff.size();
    std::string_view line = diff.substr(start, end - start);
    std::string_view code;
    for (std::string_view ours : {kBold, kCyan, kRed, kGreen}) {
      if (line.substr(0, ours.size()) == ours && line.size() >= ours.size() + kReset.size() &&
          line.substr(line.size() - kReset.size()) == kReset) {
        code = ours;
      }
    }
    if (!code.empty()) line = line.substr(code.size(), line.size() - code.size() - kReset.size());
    out += code;
    out += core::escape_for_terminal(line);
    if (!code.empty()) out += kReset;
    if (end < diff.size()) out += '\n';
    start = end + 1;
  }
  return out;
}

std::string unified_file_diff(const std::string& path, const DiffSide& before,
                              const DiffSide& after, bool colour) {
  const Painter paint{colour};
  const unsigned before_mode = before.mode | (before.is_symlink ? 0120000u : 0100000u);
  const unsigned after_mode = after.mode | (after.is_symlink ? 0120000u : 0100000u);

  std::string out = paint.line(diff_header(path), kBold);
  if (!before.exists) {
    out += paint.line("new file mode " + octal_mode(after_mode), kBold);
  } else if (!after.exists) {
    out += paint.line("deleted file mode " + octal_mode(before_mode), kBold);
  } else if (before_mode != after_mode) {
    out += paint.line("old mode " + octal_mode(before_mode), kBold);
    out += paint.line("new mode " + octal_mode(after_mode), kBold);
  }
  const bool unshown = before.unshown || after.unshown;
  if (before.exists && after.exists && !unshown && before.content == after.content &&
      before.is_symlink == after.is_symlink) {
    return out;  // a mode change only
  }
  const std::string from = before.exists ? core::quote_name("a/" + path) : "/dev/null";
  const std::string to = after.exists ? core::quote_name("b/" + path) : "/dev/null";
  if (shown_as_binary(before, after)) {
    // With no index line `git apply` skips the section and applies the rest
    // (exit 0); with one, it refuses the whole patch ("without full index
    // line"): a change it cannot make is never left out silently.
    std::string index = "index 0000000..0000000";
    if (before.exists && after.exists && before_mode == after_mode)
      index += " " + octal_mode(after_mode);
    out += paint.line(index, kBold);
    out += "Binary files " + from + " and " + to + " differ\n";
    return out;
  }
  out += paint.line("--- " + from, kBold);
  out += paint.line("+++ " + to, kBold);

  auto emit = [&](char sign, std::string_view item, std::string_view code) {
    const bool has_newline = !item.empty() && item.back() == '\n';
    const std::string text =
        sign + std::string(has_newline ? item.substr(0, item.size() - 1) : item);
    out += !code.empty() ? paint.line(text, code) : text + "\n";
    if (!has_newline) out += "\\ No newline at end of file\n";
  };
  if (unshown) {
    // The side not shown is one placeholder line, the other in full. The
    // placeholder carries no sign: `git apply` calls the patch corrupt and
    // applies none of it (as "+placeholder" it wrote the placeholder into
    // the file).
    const std::vector<std::string_view> shown =
        split_lines(before.unshown ? after.content : before.content);
    const std::string counted = range(1, 1);
    const std::string other = range(1, shown.size());
    out += paint.line("@@ -" + (before.unshown ? counted : other) + " +" +
                          (before.unshown ? other : counted) + " @@",
                      kCyan);
    if (before.unshown) out += paint.line(std::string(kNotShownLine), kBold);
    for (std::string_view line : shown)
      emit(before.unshown ? '+' : '-', line, before.unshown ? kGreen : kRed);
    if (after.unshown) out += paint.line(std::string(kNotShownLine), kBold);
    return out;
  }

  const std::vector<std::string_view> a = split_lines(before.content);
  const std::vector<std::string_view> b = split_lines(after.content);
  const std::vector<Op> script = edit_script(a, b);

  // Group changes into hunks with kContext lines around them. The hunks come
  // in order, so the line numbers are carried from one to the next.
  std::size_t index = 0;
  std::size_t numbered = 0;  // a_line and b_line are those at script[numbered]
  std::size_t a_line = 0;
  std::size_t b_line = 0;
  while (index < script.size()) {
    while (index < script.size() && script[index] == Op::Keep)
      ++index;
    if (index >= script.size()) break;
    const std::size_t hunk_begin = index >= kContext ? index - kContext : 0;
    std::size_t hunk_end = index;
    std::size_t keeps = 0;
    for (std::size_t i = index; i < script.size(); ++i) {
      if (script[i] == Op::Keep) {
        if (++keeps > 2 * kContext) break;
      } else {
        keeps = 0;
        hunk_end = i + 1;
      }
    }
    hunk_end = std::min(script.size(), hunk_end + kContext);

    for (; numbered < hunk_begin; ++numbered) {
      if (script[numbered] != Op::Insert) ++a_line;
      if (script[numbered] != Op::Delete) ++b_line;
    }
    std::size_t a_count = 0;
    std::size_t b_count = 0;
    for (std::size_t i = hunk_begin; i < hunk_end; ++i) {
      if (script[i] != Op::Insert) ++a_count;
      if (script[i] != Op::Delete) ++b_count;
    }
    out += paint.line(
        "@@ -" + range(a_line + 1, a_count) + " +" + range(b_line + 1, b_count) + " @@", kCyan);
    for (std::size_t i = hunk_begin; i < hunk_end; ++i) {
      switch (script[i]) {
        case Op::Keep:
          emit(' ', a[a_line++], {});
          ++b_line;
          break;
        case Op::Delete:
          emit('-', a[a_line++], kRed);
          break;
        case Op::Insert:
          emit('+', b[b_line++], kGreen);
          break;
      }
    }
    numbered = hunk_end;
    index = hunk_end;
  }
  return out;
}

}  // namespace pulsebox::workspace
