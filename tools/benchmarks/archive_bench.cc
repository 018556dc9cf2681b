// Costs of shipping a workspace as a tar stream (src/archive/): writing a
// 100 MB tree (1000 files of 100 KB) to a sink that drops the bytes, the
// SHA-256 alone of the same number of bytes (the writer hashes what it
// writes, the extractor what it reads), and extracting the stream into a
// fresh directory. The tree is in the page cache: this measures the CPU
// and system-call cost, not the disk. Everything goes under $TMPDIR: on
// tmpfs it measures this code, on ext4 mostly the kernel's inode
// allocation (ext4_create).
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "archive/workspace_archive.h"
#include "core/sha256.h"

namespace {

namespace fs = std::filesystem;

constexpr int kFiles = 1000;
constexpr std::size_t kFileBytes = 100 * 1000;

class Tree {
 public:
  Tree() {
    std::string pattern = (fs::temp_directory_path() / "pulsebox-archive-bench-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    base_ = pattern;
    std::string content(kFileBytes, '\0');
    for (int i = 0; i < kFiles; ++i) {
      for (std::size_t j = 0; j < content.size(); ++j)
        content[j] = static_cast<char>(i * 31 + j);
      const fs::path dir = root() / ("d" + std::to_string(i / 100));
      fs::create_directories(dir);
      std::ofstream(dir / ("f" + std::to_string(i)), std::ios::binary) << content;
    }
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(base_, ec);
  }
  fs::path root() const { return base_ / "tree"; }
  fs::path base() const { return base_; }

 private:
  fs::path base_;
};

Tree& tree() {
  static Tree instance;
  return instance;
}

void BM_WriteArchive(benchmark::State& state) {
  std::uint64_t bytes = 0;
  for (auto _ : state) {
    auto summary = pulsebox::archive::write_tree_archive(tree().root(), [&](std::string_view b) {
      bytes += b.size();
      return pulsebox::core::ok_status();
    });
    if (!summary.ok()) state.SkipWithError(summary.error().to_string().c_str());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_WriteArchive)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Sha256Alone(benchmark::State& state) {
  const std::string chunk(1 << 16, 'x');
  const std::size_t total = kFiles * kFileBytes;
  for (auto _ : state) {
    pulsebox::core::Sha256 hasher;
    for (std::size_t done = 0; done < total; done += chunk.size())
      hasher.update(chunk);
    benchmark::DoNotOptimize(hasher.hex_digest());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * total));
}
BENCHMARK(BM_Sha256Alone)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ExtractArchive(benchmark::State& state) {
  std::string stream;
  auto written = pulsebox::archive::write_tree_archive(tree().root(), [&](std::string_view b) {
    stream.append(b);
    return pulsebox::core::ok_status();
  });
  if (!written.ok()) {
    state.SkipWithError(written.error().to_string().c_str());
    return;
  }
  int round = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const fs::path dest = tree().base() / ("dest" + std::to_string(round++));
    fs::create_directory(dest);
    std::size_t offset = 0;
    state.ResumeTiming();
    auto summary = pulsebox::archive::extract_archive(
        [&]() -> pulsebox::core::Result<std::string_view> {
          const std::size_t size = std::min<std::size_t>(1 << 16, stream.size() - offset);
          std::string_view piece(stream.data() + offset, size);
          offset += size;
          return piece;
        },
        dest);
    if (!summary.ok()) state.SkipWithError(summary.error().to_string().c_str());
  }
  // Removed at the end, not between rounds: ext4 allocates inodes slowly
  // right after many were freed (recently_deleted), which would measure
  // the benchmark's own deletions.
  for (int i = 0; i < round; ++i)
    fs::remove_all(tree().base() / ("dest" + std::to_string(i)));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * stream.size()));
  state.counters["stream_MB"] = static_cast<double>(stream.size()) / 1e6;
}
// A bounded number of rounds: each leaves 100 MB on disk until the end.
BENCHMARK(BM_ExtractArchive)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(8);

}  // namespace

BENCHMARK_MAIN();
