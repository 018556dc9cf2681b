// Start-to-exit latency of a few commands, interleaved: each round runs
// every command once, in a new (seeded) order, from posix_spawn to wait4,
// with its output on /dev/null. Prints each command's median and p95 and its
// ratio to the reference's median. Made for places without Python, such as
// the test VM of tools/vm-test (`tools/bench vm`).
//
//   spawn_latency ROUNDS GAP_MS REFERENCE :: NAME [VAR=VALUE...] PROGRAM [ARG...] :: NAME ...
//
// "::" starts each command (its arguments may hold "--"); REFERENCE names
// the command the ratios are to (bwrap). VAR=VALUE words
// before PROGRAM are added to that command's environment. Exits 1 when a
// command fails, naming it and its status.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern char** environ;

namespace {

struct Command {
  std::string name;
  std::vector<std::string> environment;  // VAR=VALUE, environ's first
  std::vector<std::string> argv;
  std::vector<double> samples_ms;
};

double now_ms() {
  timespec at{};
  ::clock_gettime(CLOCK_MONOTONIC, &at);
  return static_cast<double>(at.tv_sec) * 1e3 + static_cast<double>(at.tv_nsec) / 1e6;
}

std::vector<char*> pointers(std::vector<std::string>& words) {
  std::vector<char*> out;
  for (auto& word : words)
    out.push_back(word.data());
  out.push_back(nullptr);
  return out;
}

// One run's milliseconds; negative when it could not start or failed.
double run_once(Command& command, int* status) {
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  ::posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry)
    environment.emplace_back(*entry);
  environment.insert(environment.end(), command.environment.begin(), command.environment.end());
  auto argv = pointers(command.argv);
  auto envp = pointers(environment);
  const double start = now_ms();
  pid_t pid = 0;
  const int error = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    *status = -error;
    return -1;
  }
  while (::waitpid(pid, status, 0) < 0) {
  }
  const double elapsed = now_ms() - start;
  return WIFEXITED(*status) && WEXITSTATUS(*status) == 0 ? elapsed : -1;
}

double quantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const std::size_t index = static_cast<std::size_t>(q * static_cast<double>(values.size() - 1));
  return values[index];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6 || std::strcmp(argv[4], "::") != 0) {
    std::fprintf(stderr,
                 "usage: spawn_latency ROUNDS GAP_MS REFERENCE :: NAME [VAR=VALUE...] PROGRAM "
                 "[ARG...] [:: NAME ...]\n");
    return 2;
  }
  const int rounds = std::atoi(argv[1]);
  const int gap_ms = std::atoi(argv[2]);
  const std::string reference = argv[3];
  std::vector<Command> commands;
  for (int i = 4; i < argc; ++i) {
    if (std::strcmp(argv[i], "::") == 0) {
      commands.emplace_back();
      continue;
    }
    Command& command = commands.back();
    if (command.name.empty()) {
      command.name = argv[i];
    } else if (command.argv.empty() && std::strchr(argv[i], '=') != nullptr) {
      command.environment.emplace_back(argv[i]);
    } else {
      command.argv.emplace_back(argv[i]);
    }
  }
  const auto reference_command = std::find_if(
      commands.begin(), commands.end(), [&](const Command& c) { return c.name == reference; });
  if (rounds < 1 || reference_command == commands.end() ||
      std::any_of(commands.begin(), commands.end(),
                  [](const Command& c) { return c.argv.empty(); })) {
    std::fprintf(stderr,
                 "spawn_latency: give ROUNDS >= 1, a command per NAME, and a REFERENCE that "
                 "names one of them\n");
    return 2;
  }
  std::mt19937 order(8);
  std::vector<Command*> shuffled;
  for (auto& command : commands)
    shuffled.push_back(&command);
  for (int round = 0; round < rounds; ++round) {
    std::shuffle(shuffled.begin(), shuffled.end(), order);
    for (Command* command : shuffled) {
      int status = 0;
      const double ms = run_once(*command, &status);
      if (ms < 0) {
        std::fprintf(stderr, "spawn_latency: %s failed (%s %d)\n", command->name.c_str(),
                     status < 0 ? "spawn error" : "wait status", status < 0 ? -status : status);
        return 1;
      }
      command->samples_ms.push_back(ms);
      if (gap_ms > 0) ::usleep(static_cast<useconds_t>(gap_ms) * 1000);
    }
  }
  const double reference_median = quantile(reference_command->samples_ms, 0.5);
  std::printf("%-12s %10s %10s   / %s (%d rounds)\n", "command", "median ms", "p95 ms",
              reference.c_str(), rounds);
  for (const auto& command : commands) {
    const double median = quantile(command.samples_ms, 0.5);
    std::printf("%-12s %10.2f %10.2f %9.2f x\n", command.name.c_str(), median,
                quantile(command.samples_ms, 0.95), median / reference_median);
  }
  return 0;
}
