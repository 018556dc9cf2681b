// Costs of turning an overlay upper directory into a transaction and of
// committing it, as a function of the number of changed files and of the
// size of the untouched workspace. Both must depend on the first only.
//
// Arguments of each benchmark: {untouched workspace files, changed files}.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>

#include "pulsebox/workspace.h"

namespace {

namespace fs = std::filesystem;

void write(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// One workspace per size of untouched content, made once and reused.
class Fixture {
 public:
  explicit Fixture(int untouched) {
    std::string pattern = (fs::temp_directory_path() / "pulsebox-bench-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    base_ = pattern;
    fs::create_directories(workspace());
    for (int d = 0; d < (untouched + 999) / 1000; ++d) {
      const fs::path dir = workspace() / ("untouched" + std::to_string(d));
      fs::create_directories(dir);
      for (int f = 0; f < 1000 && d * 1000 + f < untouched; ++f) {
        write(dir / ("file" + std::to_string(f) + ".txt"), "untouched content\n");
      }
    }
  }
  ~Fixture() {
    std::error_code ec;
    fs::remove_all(base_, ec);
  }
  fs::path workspace() const { return base_ / "ws"; }

  // A fresh upper directory with `changed` new files in 10 directories.
  fs::path make_upper(int changed) {
    const fs::path upper = base_ / ("upper" + std::to_string(round_++));
    for (int i = 0; i < changed; ++i) {
      const fs::path dir =
          upper / ("changed" + std::to_string(round_)) / ("d" + std::to_string(i % 10));
      if (i < 10) fs::create_directories(dir);
      write(dir / ("f" + std::to_string(i)), "changed content " + std::to_string(i) + "\n");
    }
    return upper;
  }

 private:
  fs::path base_;
  int round_ = 0;
};

Fixture& fixture(int untouched) {
  static std::map<int, std::unique_ptr<Fixture>> fixtures;
  auto& slot = fixtures[untouched];
  if (!slot) slot = std::make_unique<Fixture>(untouched);
  return *slot;
}

void BM_ImportOverlay(benchmark::State& state) {
  Fixture& f = fixture(static_cast<int>(state.range(0)));
  pulsebox::Workspace ws(f.workspace());
  for (auto _ : state) {
    state.PauseTiming();
    const fs::path upper = f.make_upper(static_cast<int>(state.range(1)));
    state.ResumeTiming();
    const auto tx = ws.import_overlay(upper, f.workspace());
    state.PauseTiming();
    ws.discard(*tx);
    fs::remove_all(upper);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * state.range(1));
}

void BM_Commit(benchmark::State& state) {
  Fixture& f = fixture(static_cast<int>(state.range(0)));
  pulsebox::Workspace ws(f.workspace());
  for (auto _ : state) {
    state.PauseTiming();
    const fs::path upper = f.make_upper(static_cast<int>(state.range(1)));
    const auto tx = ws.import_overlay(upper, f.workspace());
    state.ResumeTiming();
    ws.commit(*tx);
    state.PauseTiming();
    fs::remove_all(upper);
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * state.range(1));
}

void Arguments(benchmark::internal::Benchmark* b) {
  b->Args({0, 1000})->Args({0, 10000})->Args({100000, 1000})->Args({100000, 10000});
  b->ArgNames({"untouched", "changed"});
  b->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();
}

BENCHMARK(BM_ImportOverlay)->Apply(Arguments);
BENCHMARK(BM_Commit)->Apply(Arguments);

}  // namespace

BENCHMARK_MAIN();
