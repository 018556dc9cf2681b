// Line diffs of the change review: minimal counts, and memory that does not
// grow with the square of a file's length.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "workspace/diff.h"

namespace pulsebox::workspace {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    lines.push_back(text.substr(start, end - start));
    start = end;
  }
  return lines;
}

// The longest common subsequence of two line lists, by the quadratic table:
// a minimal diff removes n - LCS lines and adds m - LCS.
std::size_t longest_common_lines(const std::vector<std::string>& a,
                                 const std::vector<std::string>& b) {
  std::vector<std::vector<std::size_t>> table(a.size() + 1,
                                              std::vector<std::size_t>(b.size() + 1, 0));
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      table[i][j] = a[i - 1] == b[j - 1] ? table[i - 1][j - 1] + 1
                                         : std::max(table[i - 1][j], table[i][j - 1]);
    }
  }
  return table[a.size()][b.size()];
}

// The '+' and '-' lines of a unified diff's hunks.
std::pair<std::uint64_t, std::uint64_t> signed_lines(const std::string& diff) {
  std::uint64_t added = 0, removed = 0;
  for (const std::string& line : lines_of(diff)) {
    if (line.starts_with("+++ ") || line.starts_with("--- ")) continue;
    if (line.starts_with("+")) ++added;
    if (line.starts_with("-")) ++removed;
  }
  return {added, removed};
}

DiffSide file_side(std::string content) {
  return DiffSide{.exists = true, .is_symlink = false, .mode = 0644, .content = std::move(content)};
}

// `lines` random lines: one in `unique_in` a line only this text has, the
// rest one of `distinct` lines, so that two texts share many of them.
std::string random_text(std::mt19937& random, int lines, unsigned unique_in, unsigned distinct) {
  std::string out;
  for (int i = 0; i < lines; ++i) {
    out += random() % unique_in == 0 ? "only here " + std::to_string(random()) + "\n"
                                     : "line " + std::to_string(random() % distinct) + "\n";
  }
  return out;
}

TEST(LineDiff, CountsAreMinimalAndMatchTheUnifiedDiff) {
  std::mt19937 random(20261206);
  for (int round = 0; round < 400; ++round) {
    auto text = [&](int lines) { return random_text(random, lines, 6, 5); };
    const std::string before = text(static_cast<int>(random() % 40));
    std::string after = text(static_cast<int>(random() % 40));
    if (round % 3 == 0) after = before.substr(0, before.size() / 2) + after;  // a shared prefix
    const auto lcs = longest_common_lines(lines_of(before), lines_of(after));
    const LineCounts counts = count_changed_lines(file_side(before), file_side(after));
    ASSERT_FALSE(counts.binary);
    EXPECT_EQ(counts.removed, lines_of(before).size() - lcs) << before << "--\n" << after;
    EXPECT_EQ(counts.added, lines_of(after).size() - lcs) << before << "--\n" << after;
    const auto [added, removed] =
        signed_lines(unified_file_diff("f.txt", file_side(before), file_side(after), false));
    EXPECT_EQ(added, counts.added) << before << "--\n" << after;
    EXPECT_EQ(removed, counts.removed) << before << "--\n" << after;
  }
}

// Applies a unified diff of one file (as unified_file_diff makes it) to
// `before`'s lines, checking every context and '-' line against them; the
// text it gives, or "<mismatch at line N>" / "<past the end at line N>".
std::string apply_patch(const std::string& before, const std::string& diff) {
  const std::vector<std::string> old_lines = lines_of(before);
  std::string out;
  std::size_t taken = 0;  // old lines consumed
  std::string* last = nullptr;
  for (const std::string& line : lines_of(diff)) {
    if (line.starts_with("diff ") || line.starts_with("--- ") || line.starts_with("+++ ")) continue;
    if (line.starts_with("@@ -")) {
      // "@@ -START[,COUNT] ..." : copy the old lines before the hunk.
      std::size_t start = std::stoul(line.substr(4));
      const std::size_t comma = line.find(',');
      const std::size_t space = line.find(' ', 4);
      if (comma != std::string::npos && comma < space && std::stoul(line.substr(comma + 1)) == 0)
        ++start;  // an empty range names the line before it
      for (; taken + 1 < start; ++taken)
        out += old_lines[taken];
      continue;
    }
    if (line == "\\ No newline at end of file\n") {
      if (last != nullptr && !last->empty() && last->back() == '\n') last->pop_back();
      continue;
    }
    const std::string text = line.substr(1);
    if (line[0] == ' ' || line[0] == '-') {
      // The diff drops a missing final newline; compare without it.
      if (taken >= old_lines.size())
        return "<past the end at line " + std::to_string(taken + 1) + ">";
      const std::string& expected = old_lines[taken];
      const std::string bare = expected.ends_with('\n') ? expected : expected + "\n";
      if (bare != text) return "<mismatch at line " + std::to_string(taken + 1) + ">";
      ++taken;
    }
    if (line[0] == ' ' || line[0] == '+') {
      out += text;
      last = &out;
    } else {
      last = nullptr;
    }
  }
  for (; taken < old_lines.size(); ++taken)
    out += old_lines[taken];
  return out;
}

// What the review shows is a patch: applied to the old text it gives the
// new one, line for line.
TEST(LineDiff, ThePatchTurnsTheOldTextIntoTheNew) {
  std::mt19937 random(20261207);
  for (int round = 0; round < 600; ++round) {
    auto text = [&](int lines) {
      std::string out = random_text(random, lines, 5, 6);
      if (!out.empty() && random() % 4 == 0) out.pop_back();  // no final newline
      return out;
    };
    const std::string before = text(static_cast<int>(random() % 60));
    std::string after = text(static_cast<int>(random() % 60));
    if (round % 3 == 0) after = before.substr(0, before.size() / 2) + after;  // a shared prefix
    if (round % 5 == 0) after += before.substr(before.size() / 3);            // a shared suffix
    if (before == after) continue;
    const std::string diff = unified_file_diff("f.txt", file_side(before), file_side(after), false);
    EXPECT_EQ(apply_patch(before, diff), after) << before << "--\n" << after << "--\n" << diff;
  }
}

// At the search's limit (4,000 edits) the counts still say what the patch
// shows: one edit under it a minimal diff, one over it the whole middle
// replaced, however many of those edits are lines only one side has.
TEST(LineDiff, AtTheSearchLimitCountsAndPatchAgree) {
  for (const int unique_lines : {2000, 2001}) {
    std::string before, after;
    for (int i = 0; i < unique_lines; ++i) {
      before += "before " + std::to_string(i) + "\nshared " + std::to_string(i) + "\n";
      after += "after " + std::to_string(i) + "\nshared " + std::to_string(i) + "\n";
    }
    const LineCounts counts = count_changed_lines(file_side(before), file_side(after));
    const auto [added, removed] =
        signed_lines(unified_file_diff("f.txt", file_side(before), file_side(after), false));
    EXPECT_EQ(counts.added, added) << unique_lines;
    EXPECT_EQ(counts.removed, removed) << unique_lines;
    // Over the limit: every line but the shared last one (the common suffix).
    const std::uint64_t expected = unique_lines == 2000 ? 2000 : 4001;
    EXPECT_EQ(counts.added, expected) << unique_lines;
  }
}

// Resident memory from /proc/self/status, in kB: "VmRSS" now, "VmHWM" the
// peak since the last reset; resetting it to the current size is Linux's
// clear_refs 5.
void reset_peak() {
  std::ofstream("/proc/self/clear_refs") << "5";
}
long status_kb(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with(field + ":")) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

std::string numbered_lines(const std::string& stem, int count) {
  std::string out;
  for (int i = 0; i < count; ++i)
    out += stem + std::to_string(i) + "\n";
  return out;
}

// A file of 20,000 lines added or deleted, and one whose every line
// changed (beyond the search's limit): each reviewed in a few MB, not the
// hundreds of MB a trace of every search step as wide as the limit took.
TEST(LineDiff, LongFilesAddedDeletedOrRewrittenAreReviewedInLittleMemory) {
  const DiffSide absent;
  const DiffSide added = file_side(numbered_lines("new line ", 20000));
  const DiffSide old_text = file_side(numbered_lines("old line ", 20000));
  const DiffSide rewritten = file_side(numbered_lines("rewritten line ", 20000));
  struct Case {
    const char* name;
    const DiffSide& before;
    const DiffSide& after;
    std::uint64_t removed, added;
  };
  for (const Case& c :
       {Case{"added", absent, added, 0, 20000}, Case{"deleted", old_text, absent, 20000, 0},
        Case{"rewritten", old_text, rewritten, 20000, 20000}}) {
    reset_peak();
    const long start = status_kb("VmRSS");
    ASSERT_GT(start, 0) << "no VmRSS in /proc/self/status";
    const LineCounts counts = count_changed_lines(c.before, c.after);
    const std::string diff = unified_file_diff("big.txt", c.before, c.after, false);
    const long grown = status_kb("VmHWM") - start;
    EXPECT_EQ(counts.removed, c.removed) << c.name;
    EXPECT_EQ(counts.added, c.added) << c.name;
    EXPECT_EQ(signed_lines(diff), std::make_pair(c.added, c.removed)) << c.name;
    // Under AddressSanitizer freed memory is held back (its quarantine), so
    // the bound leaves room for that: at most 1.4 MB a case in a gcc build,
    // up to 19 MB under the sanitizers, about 249 MB each with the old trace.
    EXPECT_LT(grown, 48 * 1024) << c.name << ": the peak grew by " << grown << " kB";
  }
}

}  // namespace
}  // namespace pulsebox::workspace
