// What a run pays for its seccomp filter: compiling the profile with
// libseccomp, versus reading the compiled program from the on-disk cache (a
// new pulsebox process), versus the in-memory cache (a long-lived host).
#include <benchmark/benchmark.h>
#include <stdlib.h>

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

void BM_Compile(benchmark::State& state) {
  const Profile& profile = profile_named(kNames[state.range(0)]);
  for (auto _ : state)
    benchmark::DoNotOptimize(compile(profile).value());
  state.SetLabel(kNames[state.range(0)]);
}
BENCHMARK(BM_Compile)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

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

}  // namespace

BENCHMARK_MAIN();
