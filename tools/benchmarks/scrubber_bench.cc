// Scrubber throughput: 100 registered secrets plus every built-in pattern,
// over build-log-like text with a secret now and then; whole-text scrub()
// and the streaming scrubber (64 KiB chunks, as the supervisor feeds it).
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "pulsebox/secrets.h"

namespace {

std::vector<std::string> make_secrets() {
  std::vector<std::string> secrets;
  std::mt19937 random(7);
  const std::string alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  for (int i = 0; i < 100; ++i) {
    std::string secret = "s3cr3t-";
    for (int j = 0; j < 24; ++j)
      secret += alphabet[random() % alphabet.size()];
    secrets.push_back(secret);
  }
  return secrets;
}

// ~8 MiB of compiler/test output; one line in 500 carries a secret.
std::string make_text(const std::vector<std::string>& secrets) {
  std::string text;
  std::mt19937 random(11);
  for (int line = 0; text.size() < (8u << 20); ++line) {
    text += "[" + std::to_string(line) + "/9000] g++ -O2 -c src/module" +
            std::to_string(random() % 400) + ".cc -o build/module.o -Iinclude -DNDEBUG\n";
    if (line % 500 == 0) text += "export API_TOKEN=" + secrets[random() % secrets.size()] + "\n";
  }
  return text;
}

void BM_Scrub(benchmark::State& state) {
  const auto secrets = make_secrets();
  const pulsebox::SecretScrubber scrubber(secrets, true);
  const std::string text = make_text(secrets);
  for (auto _ : state) {
    benchmark::DoNotOptimize(scrubber.scrub(text));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_Scrub)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_ScrubStream(benchmark::State& state) {
  const auto secrets = make_secrets();
  const pulsebox::SecretScrubber scrubber(secrets, true);
  const std::string text = make_text(secrets);
  for (auto _ : state) {
    auto stream = scrubber.stream();
    std::size_t out = 0;
    for (std::size_t at = 0; at < text.size(); at += 65536)
      out += stream.feed(std::string_view(text).substr(at, 65536)).size();
    out += stream.finish().size();
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_ScrubStream)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace

BENCHMARK_MAIN();
