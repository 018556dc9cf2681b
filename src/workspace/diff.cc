#include "workspace/diff.h"

#include <algorithm>
#include <cstdio>
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

// Myers' O((N+M)D) shortest edit script, on the part left after trimming the
// common prefix and suffix.
std::vector<Op> edit_script(const std::vector<std::string_view>& a,
                            const std::vector<std::string_view>& b) {
  std::size_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix])
    ++prefix;
  std::size_t suffix = 0;
  while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
         a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix]) {
    ++suffix;
  }
  const long n = static_cast<long>(a.size() - prefix - suffix);
  const long m = static_cast<long>(b.size() - prefix - suffix);
  auto A = [&](long i) { return a[prefix + static_cast<std::size_t>(i)]; };
  auto B = [&](long j) { return b[prefix + static_cast<std::size_t>(j)]; };

  std::vector<Op> middle;
  const long max = std::min<long>(n + m, static_cast<long>(kMaxEditDistance));
  const long offset = max + 1;
  std::vector<long> v(static_cast<std::size_t>(2 * max + 3), 0);
  std::vector<std::vector<long>> trace;
  bool found = n + m == 0;
  for (long d = 0; d <= max && !found; ++d) {
    trace.push_back(v);
    for (long k = -d; k <= d; k += 2) {
      long x;
      if (k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1])) {
        x = v[offset + k + 1];
      } else {
        x = v[offset + k - 1] + 1;
      }
      long y = x - k;
      while (x < n && y < m && A(x) == B(y)) {
        ++x;
        ++y;
      }
      v[offset + k] = x;
      if (x >= n && y >= m) {
        found = true;
        break;
      }
    }
  }
  if (found && n + m > 0) {
    trace.push_back(v);
    long x = n;
    long y = m;
    for (long d = static_cast<long>(trace.size()) - 2; d >= 0; --d) {
      const std::vector<long>& vd = trace[static_cast<std::size_t>(d)];
      const long k = x - y;
      long prev_k;
      if (k == -d || (k != d && vd[offset + k - 1] < vd[offset + k + 1])) {
        prev_k = k + 1;
      } else {
        prev_k = k - 1;
      }
      const long prev_x = vd[offset + prev_k];
      const long prev_y = prev_x - prev_k;
      while (x > prev_x && y > prev_y) {
        middle.push_back(Op::Keep);
        --x;
        --y;
      }
      if (d > 0) middle.push_back(x == prev_x ? Op::Insert : Op::Delete);
      x = prev_x;
      y = prev_y;
    }
    std::reverse(middle.begin(), middle.end());
  } else if (!found) {
    middle.assign(static_cast<std::size_t>(n), Op::Delete);
    middle.insert(middle.end(), static_cast<std::size_t>(m), Op::Insert);
  }
  std::vector<Op> script(prefix, Op::Keep);
  script.insert(script.end(), middle.begin(), middle.end());
  script.insert(script.end(), suffix, Op::Keep);
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

LineCounts count_changed_lines(const DiffSide& before, const DiffSide& after) {
  LineCounts counts;
  if (looks_binary(before.content) || looks_binary(after.content)) {
    counts.binary = before.content != after.content;
    return counts;
  }
  const std::vector<std::string_view> a = split_lines(before.content);
  const std::vector<std::string_view> b = split_lines(after.content);
  for (const Op op : edit_script(a, b)) {
    if (op == Op::Insert) ++counts.added;
    if (op == Op::Delete) ++counts.removed;
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
  if (before.exists && after.exists && before.content == after.content &&
      before.is_symlink == after.is_symlink) {
    return out;  // a mode change only
  }
  const std::string from = before.exists ? core::quote_name("a/" + path) : "/dev/null";
  const std::string to = after.exists ? core::quote_name("b/" + path) : "/dev/null";
  if (looks_binary(before.content) || looks_binary(after.content)) {
    out += "Binary files " + from + " and " + to + " differ\n";
    return out;
  }
  out += paint.line("--- " + from, kBold);
  out += paint.line("+++ " + to, kBold);

  const std::vector<std::string_view> a = split_lines(before.content);
  const std::vector<std::string_view> b = split_lines(after.content);
  const std::vector<Op> script = edit_script(a, b);
  auto emit = [&](char sign, std::string_view item, std::string_view code) {
    const bool has_newline = !item.empty() && item.back() == '\n';
    const std::string text =
        sign + std::string(has_newline ? item.substr(0, item.size() - 1) : item);
    out += !code.empty() ? paint.line(text, code) : text + "\n";
    if (!has_newline) out += "\\ No newline at end of file\n";
  };

  // Group changes into hunks with kContext lines around them.
  std::size_t index = 0;
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

    // Line numbers at hunk_begin.
    std::size_t a_line = 0;
    std::size_t b_line = 0;
    for (std::size_t i = 0; i < hunk_begin; ++i) {
      if (script[i] != Op::Insert) ++a_line;
      if (script[i] != Op::Delete) ++b_line;
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
    index = hunk_end;
  }
  return out;
}

}  // namespace pulsebox::workspace
