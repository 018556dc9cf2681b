// Exit statuses shared by every subcommand and by the served run's clients
// (see docs/cli.md). Constants only: the pre-libc client includes it too.
#pragma once

namespace pulsebox::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;  // the input was read and is invalid
inline constexpr int kExitUsage = 125;      // pulsebox itself refused or failed

}  // namespace pulsebox::cli
