// The cost of one audit record (a run writes about a dozen): hash-chained,
// scrubbed, appended under flock; keyed, also MACed and anchored. And what
// a new keyed log costs before its first record (loading the key, opening
// the anchor; a server makes one per run). And six records appended one by
// one against together.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "pulsebox/audit.h"
#include "pulsebox/secrets.h"

namespace {

struct BenchDir {
  BenchDir() {
    char dir_template[] = "/tmp/pulsebox-audit-bench-XXXXXX";
    path = ::mkdtemp(dir_template);
  }
  ~BenchDir() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
};

pulsebox::AuditRecord sample() {
  return {.action = "lifecycle-transition",
          .target = "run-0123456789abcdef",
          .decision = "allow",
          .isolation_level = "native",
          .detail = "starting -> running"};
}

void BM_AuditRecord(benchmark::State& state) {
  const BenchDir dir;
  const pulsebox::SecretScrubber scrubber({}, true);
  pulsebox::AuditLog::Options options;
  if (state.range(0) != 0) options.key = {.file = dir.path / "keys/audit.key", .chosen = true};
  pulsebox::AuditLog log(dir.path / "audit.jsonl", &scrubber, options);
  for (auto _ : state)
    log.record(sample());
  state.SetLabel(state.range(0) != 0 ? "keyed" : "unkeyed");
}
BENCHMARK(BM_AuditRecord)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// A run's six enforcement records (the network decision and one per
// dimension), keyed: appended one by one, or together (record_all).
void BM_AuditSixRecords(benchmark::State& state) {
  const BenchDir dir;
  const pulsebox::SecretScrubber scrubber({}, true);
  pulsebox::AuditLog log(dir.path / "audit.jsonl", &scrubber,
                         {.key = {.file = dir.path / "keys/audit.key", .chosen = true}});
  const std::vector<pulsebox::AuditRecord> six(6, sample());
  for (auto _ : state) {
    if (state.range(0) != 0) {
      log.record_all(six);
    } else {
      for (const auto& record : six)
        log.record(record);
    }
  }
  state.SetLabel(state.range(0) != 0 ? "together" : "one by one");
}
BENCHMARK(BM_AuditSixRecords)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

void BM_AuditKeyedLogOpen(benchmark::State& state) {
  const BenchDir dir;
  const pulsebox::AuditLog::Options options{
      .key = {.file = dir.path / "keys/audit.key", .chosen = true}};
  { pulsebox::AuditLog(dir.path / "audit.jsonl", nullptr, options).record(sample()); }
  for (auto _ : state) {
    pulsebox::AuditLog log(dir.path / "audit.jsonl", nullptr, options);
    benchmark::DoNotOptimize(log.keyed());
  }
}
BENCHMARK(BM_AuditKeyedLogOpen)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
