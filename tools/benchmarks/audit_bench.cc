// The cost of one audit record (a run writes about a dozen): hash-chained,
// scrubbed, appended under flock.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>

#include "pulsebox/audit.h"
#include "pulsebox/secrets.h"

namespace {

void BM_AuditRecord(benchmark::State& state) {
  char dir_template[] = "/tmp/pulsebox-audit-bench-XXXXXX";
  const std::filesystem::path dir = ::mkdtemp(dir_template);
  const pulsebox::SecretScrubber scrubber({}, true);
  pulsebox::AuditLog log(dir / "audit.jsonl", &scrubber);
  for (auto _ : state) {
    log.record({.action = "lifecycle-transition",
                .target = "run-0123456789abcdef",
                .decision = "allow",
                .isolation_level = "native",
                .detail = "starting -> running"});
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_AuditRecord)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
