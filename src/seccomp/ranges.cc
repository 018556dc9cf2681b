#include "seccomp/ranges.h"

#include <linux/seccomp.h>

#include <algorithm>
#include <cstddef>

namespace pulsebox::seccomp {

namespace {

constexpr std::uint32_t kArchOffset = offsetof(seccomp_data, arch);
constexpr std::uint32_t kNrOffset = offsetof(seccomp_data, nr);
constexpr std::size_t kMaxConditionalJump = 255;

// A comparison "number >= pivot": each side is another comparison (>= 0,
// its index) or, for a single interval, that interval's target (~target).
struct Comparison {
  std::uint32_t pivot = 0;
  int below = 0;
  int at_or_above = 0;
};

class TreeBuilder {
 public:
  TreeBuilder(const std::vector<NumberInterval>& intervals, const std::vector<int>& targets)
      : intervals_(intervals), targets_(targets) {}

  // Comparisons in pre-order: the "below" side always follows its parent,
  // so every jump goes forward.
  int build(std::size_t low, std::size_t high) {
    if (high - low == 1) return ~targets_[low];
    const std::size_t middle = low + (high - low) / 2;
    const int index = static_cast<int>(comparisons_.size());
    comparisons_.push_back({intervals_[middle].first, 0, 0});
    const int below = build(low, middle);
    const int above = build(middle, high);
    comparisons_[static_cast<std::size_t>(index)].below = below;
    comparisons_[static_cast<std::size_t>(index)].at_or_above = above;
    return index;
  }
  const std::vector<Comparison>& comparisons() const { return comparisons_; }

 private:
  const std::vector<NumberInterval>& intervals_;
  const std::vector<int>& targets_;
  std::vector<Comparison> comparisons_;
};

sock_filter statement(std::uint16_t code, std::uint32_t k) {
  return sock_filter{code, 0, 0, k};
}

}  // namespace

std::optional<std::vector<sock_filter>> ranged_program(const std::vector<NumberInterval>& intervals,
                                                       std::uint32_t native_arch,
                                                       const std::vector<sock_filter>& remainder) {
  if (intervals.size() < 2 || intervals.front().first != 0) return std::nullopt;
  for (std::size_t i = 1; i < intervals.size(); ++i) {
    if (intervals[i].first <= intervals[i - 1].first) return std::nullopt;
  }
  if (intervals.back().action || intervals.back().first > kX32SyscallBit) return std::nullopt;

  // Targets: one return per distinct action, then the remainder (last).
  std::vector<std::uint32_t> actions;
  std::vector<int> targets;
  for (const auto& interval : intervals) {
    if (!interval.action) {
      targets.push_back(-1);
      continue;
    }
    auto found = std::find(actions.begin(), actions.end(), *interval.action);
    if (found == actions.end()) found = actions.insert(actions.end(), *interval.action);
    targets.push_back(static_cast<int>(found - actions.begin()));
  }
  const int remainder_target = static_cast<int>(actions.size());
  for (int& target : targets) {
    if (target < 0) target = remainder_target;
  }
  TreeBuilder tree(intervals, targets);
  tree.build(0, intervals.size());
  const auto& comparisons = tree.comparisons();

  std::vector<sock_filter> program;
  // A call from another architecture goes to the remainder, whose own
  // check kills it, exactly as libseccomp's full program would.
  program.push_back(statement(BPF_LD | BPF_W | BPF_ABS, kArchOffset));
  program.push_back(sock_filter{BPF_JMP | BPF_JEQ | BPF_K, 1, 0, native_arch});
  const std::size_t to_remainder = program.size();
  program.push_back(statement(BPF_JMP | BPF_JA, 0));  // its offset is set below
  program.push_back(statement(BPF_LD | BPF_W | BPF_ABS, kNrOffset));
  const std::size_t first_comparison = program.size();
  const std::size_t first_target = first_comparison + comparisons.size();
  auto position = [&](int reference) {
    return reference >= 0 ? first_comparison + static_cast<std::size_t>(reference)
                          : first_target + static_cast<std::size_t>(~reference);
  };
  for (std::size_t i = 0; i < comparisons.size(); ++i) {
    const std::size_t here = first_comparison + i;
    const std::size_t above = position(comparisons[i].at_or_above) - here - 1;
    const std::size_t below = position(comparisons[i].below) - here - 1;
    if (above > kMaxConditionalJump || below > kMaxConditionalJump) return std::nullopt;
    program.push_back(sock_filter{BPF_JMP | BPF_JGE | BPF_K, static_cast<std::uint8_t>(above),
                                  static_cast<std::uint8_t>(below), comparisons[i].pivot});
  }
  for (const std::uint32_t action : actions)
    program.push_back(statement(BPF_RET | BPF_K, action));
  program[to_remainder].k = static_cast<std::uint32_t>(program.size() - to_remainder - 1);
  program.insert(program.end(), remainder.begin(), remainder.end());
  if (program.size() > BPF_MAXINSNS) return std::nullopt;
  return program;
}

}  // namespace pulsebox::seccomp
