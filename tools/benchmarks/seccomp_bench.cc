// What a run pays for its seccomp filter: compiling the profile with
// libseccomp, versus reading the compiled program from the on-disk cache (a
// new pulsebox process), versus the in-memory cache (a long-lived host);
// and what a filtered command pays for a call the filter must inspect
// (socket(), whose address family it checks), against no filter; and what
// the kernel takes to install a filter (BM_Install). That
// socket() has a type the kernel refuses at once, so that what remains is
// the cost of entering the kernel and of the filter.
#include <benchmark/benchmark.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <map>

#include "seccomp/compiler.h"
#include "seccomp/profile.h"

namespace {

using namespace pulsebox::seccomp;

const Profile& profile_named(const std::string& name) {
  static std::map<std::string, Profile> profiles;
  auto it = profiles.find(name);
  if (it == profiles.end()) it = profiles.emplace(name, load_profile(name).value()).first;
  return it->second;
}

const char* kNames[] = {"default", "strict", "permissive"};

// range(1): the layout, ranges (0: what runs use, with its check against
// libseccomp's program) or libseccomp's tree alone (1: what OCI uses).
void BM_Compile(benchmark::State& state) {
  const Profile& profile = profile_named(kNames[state.range(0)]);
  const Layout layout = state.range(1) == 0 ? Layout::Ranges : Layout::BinaryTree;
  for (auto _ : state)
    benchmark::DoNotOptimize(compile(profile, layout).value());
  state.SetLabel(std::string(kNames[state.range(0)]) + (state.range(1) == 0 ? "" : " tree"));
}
BENCHMARK(BM_Compile)->ArgsProduct({{0, 1, 2}, {0, 1}})->Unit(benchmark::kMicrosecond);

void BM_CacheFromDisk(benchmark::State& state) {
  const Profile& profile = profile_named(kNames[state.range(0)]);
  char pattern[] = "/tmp/pulsebox-bench-XXXXXX";
  const std::filesystem::path dir = ::mkdtemp(pattern);
  (void)FilterCache(dir).get(profile);
  for (auto _ : state) {
    FilterCache cache(dir);  // as a new process would
    benchmark::DoNotOptimize(cache.get(profile).value());
  }
  std::filesystem::remove_all(dir);
  state.SetLabel(kNames[state.range(0)]);
}
BENCHMARK(BM_CacheFromDisk)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

void BM_CacheFromMemory(benchmark::State& state) {
  const Profile& profile = profile_named(kNames[state.range(0)]);
  FilterCache cache("");
  (void)cache.get(profile);
  for (auto _ : state)
    benchmark::DoNotOptimize(cache.get(profile).value());
  state.SetLabel(kNames[state.range(0)]);
}
BENCHMARK(BM_CacheFromMemory)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

void BM_ParseProfile(benchmark::State& state) {
  for (auto _ : state)
    benchmark::DoNotOptimize(load_profile(kNames[state.range(0)]).value());
  state.SetLabel(kNames[state.range(0)]);
}
BENCHMARK(BM_ParseProfile)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

double seconds_since(const timespec& start) {
  timespec end{};
  ::clock_gettime(CLOCK_MONOTONIC, &end);
  return static_cast<double>(end.tv_sec - start.tv_sec) +
         static_cast<double>(end.tv_nsec - start.tv_nsec) / 1e9;
}

// `measure` (seconds, negative for a failure) in a child process: a filter
// cannot be unloaded, so each measurement has a process of its own.
template <typename Measure>
double in_child(Measure measure) {
  int out[2];
  if (::pipe(out) != 0) return -1;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(out[0]);
    const double seconds = measure();
    ::_exit(seconds >= 0 && ::write(out[1], &seconds, sizeof seconds) == sizeof seconds ? 0 : 1);
  }
  ::close(out[1]);
  double seconds = -1;
  if (::read(out[0], &seconds, sizeof seconds) != sizeof seconds) seconds = -1;
  ::close(out[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? seconds : -1;
}

// Under no_new_privs, as a sandbox's command installs it; false on failure.
bool install(const std::vector<sock_filter>& program) {
  sock_fprog fprog{static_cast<unsigned short>(program.size()),
                   const_cast<sock_filter*>(program.data())};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) == 0;
}

// Seconds the kernel takes to install `program` (its seccomp() call: the
// classic-BPF check, the JIT and the per-syscall action cache, which runs
// the program once for every syscall number of each architecture).
double time_install(const std::vector<sock_filter>& program) {
  return in_child([&] {
    timespec start{};
    ::clock_gettime(CLOCK_MONOTONIC, &start);
    return install(program) ? seconds_since(start) : -1.0;
  });
}

// range(0): a profile, or 3 for a one-instruction program (allow all): the
// cost of installing any filter at all; range(1): the layout, pulsebox's
// ranges (0, what runs use) or libseccomp's binary tree (1).
void BM_Install(benchmark::State& state) {
  const bool profile = state.range(0) < 3;
  const Layout layout = state.range(1) == 0 ? Layout::Ranges : Layout::BinaryTree;
  const std::vector<sock_filter> program =
      profile ? compile(profile_named(kNames[state.range(0)]), layout).value()->program
              : std::vector<sock_filter>{BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  for (auto _ : state) {
    const double seconds = time_install(program);
    if (seconds < 0) {
      state.SkipWithError("the filter was not installed");
      break;
    }
    state.SetIterationTime(seconds);
  }
  state.counters["instructions"] = static_cast<double>(program.size());
  state.SetLabel(!profile ? "allow all"
                          : std::string(kNames[state.range(0)]) +
                                (layout == Layout::Ranges ? " ranges" : " tree"));
}
BENCHMARK(BM_Install)
    ->ArgsProduct({{0, 1, 2}, {0, 1}})
    ->Args({3, 0})
    ->UseManualTime()
    ->Iterations(50)
    ->Unit(benchmark::kMicrosecond);

constexpr int kNoSuchSocketType = 99;

// Seconds for `calls` socket() calls of `family` in a child process
// under `program` (none when empty).
double time_socket_calls(const std::vector<sock_filter>& program, int family, int calls) {
  return in_child([&] {
    if (!program.empty() && !install(program)) return -1.0;
    timespec start{};
    ::clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0; i < calls; ++i) {
      if (::socket(family, kNoSuchSocketType, 0) >= 0 || errno != EINVAL) return -1.0;
    }
    return seconds_since(start);
  });
}

// range(0): a profile, or 3 for no filter; range(1): the address family.
void BM_SocketCall(benchmark::State& state) {
  constexpr int kCalls = 200000;
  const bool filtered = state.range(0) < 3;
  std::vector<sock_filter> program;
  if (filtered) program = compile(profile_named(kNames[state.range(0)])).value()->program;
  for (auto _ : state) {
    const double seconds = time_socket_calls(program, static_cast<int>(state.range(1)), kCalls);
    if (seconds < 0) {
      state.SkipWithError("socket() did not fail with EINVAL: the filter refused it");
      break;
    }
    state.SetIterationTime(seconds / kCalls);  // the time of one call
  }
  state.counters["instructions"] = static_cast<double>(program.size());
  state.SetLabel(std::string(filtered ? kNames[state.range(0)] : "no filter") +
                 (state.range(1) == AF_UNIX ? " AF_UNIX" : " AF_INET6"));
}
BENCHMARK(BM_SocketCall)
    ->ArgsProduct({{0, 2, 3}, {AF_UNIX, AF_INET6}})
    ->UseManualTime()
    ->Iterations(5)
    ->Unit(benchmark::kNanosecond);

}  // namespace

BENCHMARK_MAIN();
