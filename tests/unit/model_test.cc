#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <set>

#include "core/text.h"
#include "pulsebox/error.h"
#include "pulsebox/limits.h"
#include "pulsebox/result.h"

namespace pulsebox {
namespace {

TEST(LimitsTest, ReferenceDefaults) {
  ResourcePolicy policy;
  EXPECT_EQ(policy.cpu_quota_percent, 100.0);
  EXPECT_FALSE(policy.cpu_time_seconds.has_value());
  EXPECT_EQ(policy.memory_bytes, 1ull << 30);
  EXPECT_EQ(policy.swap_bytes, std::optional<std::uint64_t>(1ull << 30));
  EXPECT_FALSE(policy.disk_bytes.has_value());
  EXPECT_EQ(policy.max_processes, 64u);
  EXPECT_EQ(policy.max_open_files, 256u);
  EXPECT_EQ(policy.max_output_bytes, 5ull << 20);
  EXPECT_EQ(policy.wall_time_seconds, 30.0);
  EXPECT_EQ(policy.termination_grace_seconds, 1.5);
  EXPECT_FALSE(policy.working_directory_bytes.has_value());
  EXPECT_NO_THROW(policy.validate());
}

TEST(LimitsTest, ValidationNamesTheField) {
  ResourcePolicy policy;
  policy.max_processes = 0;
  try {
    policy.validate();
    FAIL() << "no error";
  } catch (const SandboxConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("max_processes must be greater than zero"),
              std::string::npos)
        << error.what();
  }
  ResourcePolicy negative;
  negative.wall_time_seconds = -1;
  EXPECT_THROW(negative.validate(), SandboxConfigError);
  ResourcePolicy cpu;
  cpu.cpu_time_seconds = 0.0;
  EXPECT_THROW(cpu.validate(), SandboxConfigError);
}

TEST(LimitsTest, ParseSize) {
  EXPECT_EQ(parse_size("1024"), 1024u);
  EXPECT_EQ(parse_size("512M"), 512ull << 20);
  EXPECT_EQ(parse_size("1.5G"), 3ull << 29);
  EXPECT_EQ(parse_size("64k"), 64ull << 10);
  EXPECT_EQ(parse_size("2GiB"), 2ull << 30);
  EXPECT_EQ(parse_size("1T"), 1ull << 40);
  EXPECT_EQ(parse_size("10MB"), 10ull << 20);
  for (const char* bad : {"", "M", "12X", "-5M", "0", "1.5", "1e9", "5 M", "0.0001K"}) {
    EXPECT_THROW((void)parse_size(bad, "--memory"), SandboxConfigError) << bad;
  }
  try {
    (void)parse_size("12X", "--memory");
  } catch (const SandboxConfigError& error) {
    EXPECT_EQ(std::string(error.what()),
              "--memory: \"12X\" is not valid (expected a size in bytes, or a number with K, M, G "
              "or T, e.g. 512M or 1.5G)");
  }
}

TEST(LimitsTest, ParseDuration) {
  EXPECT_EQ(parse_duration_seconds("30"), 30.0);
  EXPECT_EQ(parse_duration_seconds("1.5"), 1.5);
  EXPECT_EQ(parse_duration_seconds("2s"), 2.0);
  EXPECT_EQ(parse_duration_seconds("500ms"), 0.5);
  EXPECT_EQ(parse_duration_seconds("90s"), 90.0);
  EXPECT_EQ(parse_duration_seconds("15m"), 900.0);
  EXPECT_EQ(parse_duration_seconds("1h"), 3600.0);
  EXPECT_EQ(parse_duration_seconds("1.5h"), 5400.0);
  for (const char* bad :
       {"", "0", "none", "-1", "5x", "abc", "1..5", "1h30m", "5 m", "1e3", "h", "2S"}) {
    EXPECT_THROW((void)parse_duration_seconds(bad, "--timeout"), SandboxConfigError) << bad;
  }
  try {
    (void)parse_duration_seconds("soon", "--timeout");
    ADD_FAILURE() << "accepted";
  } catch (const SandboxConfigError& error) {
    EXPECT_EQ(std::string(error.what()),
              "--timeout: \"soon\" is not valid (expected a duration: seconds, or a number with "
              "ms, s, m or h, e.g. 500ms, 90s, 15m, 1h)");
  }
}

TEST(LimitsTest, OptionalLimitsTakeZeroOrNone) {
  EXPECT_EQ(parse_duration_limit("0", "--timeout"), std::nullopt);
  EXPECT_EQ(parse_duration_limit("0s", "--timeout"), std::nullopt);
  EXPECT_EQ(parse_duration_limit("none", "--timeout"), std::nullopt);
  EXPECT_EQ(parse_duration_limit("NONE", "--timeout"), std::nullopt);
  EXPECT_EQ(parse_duration_limit("1h", "--timeout"), std::optional<double>(3600.0));
  EXPECT_EQ(parse_size_limit("none", "--swap"), std::nullopt);
  EXPECT_EQ(parse_size_limit("0", "--swap"), std::optional<std::uint64_t>(0));
  EXPECT_EQ(parse_size_limit("0M", "--swap"), std::optional<std::uint64_t>(0));
  EXPECT_EQ(parse_size_limit("2G", "--swap"), std::optional<std::uint64_t>(2ull << 30));
  for (const char* bad : {"", "unlimited", "-1", "0X", "0.0001K", "nonesuch"}) {
    EXPECT_THROW((void)parse_size_limit(bad, "--swap"), SandboxConfigError) << bad;
    EXPECT_THROW((void)parse_duration_limit(bad, "--timeout"), SandboxConfigError) << bad;
  }
  try {
    (void)parse_duration_limit("forever", "--timeout");
    ADD_FAILURE() << "accepted";
  } catch (const SandboxConfigError& error) {
    EXPECT_NE(std::string(error.what())
                  .find("--timeout: \"forever\" is not valid (expected a "
                        "duration: seconds, or a number with ms, s, m or h, "
                        "e.g. 500ms, 90s, 15m, 1h; 0 or none for no limit)"),
              std::string::npos)
        << error.what();
  }
  try {
    (void)parse_size_limit("lots", "--swap");
    ADD_FAILURE() << "accepted";
  } catch (const SandboxConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("--swap: \"lots\" is not valid (expected a size"),
              std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("none for no limit"), std::string::npos);
  }
  ResourcePolicy unlimited;
  unlimited.wall_time_seconds = kNoWallTimeLimit;
  unlimited.swap_bytes = 0;
  EXPECT_NO_THROW(unlimited.validate());
}

TEST(LimitsTest, FormatSize) {
  EXPECT_EQ(format_size(17), "17 B");
  EXPECT_EQ(format_size(512ull << 20), "512 MiB");
  EXPECT_EQ(format_size(3ull << 29), "1.5 GiB");
}

TEST(ResultTest, JsonShapeFollowsTheCliContract) {
  ProcessResult result;
  result.command = "make test";
  result.exit_code = 137;
  result.signal = 9;
  result.stdout_data = "out";
  result.stderr_data = std::string("bad\xff", 4);
  result.duration_ms = 12.5;
  result.termination_reason = TerminationReason::Oom;
  result.metrics.peak_memory_bytes = 1024;
  result.isolation_level = "native";
  result.enforcement.network = EnforcementLevel::StronglyEnforced;
  result.transaction_id = "tx-1";
  result.changes = {{"src/a.cc", ChangeKind::Modified}, {"b", ChangeKind::Deleted}};
  const auto json = nlohmann::json::parse(to_json(result));
  for (const char* key : {"v", "command", "argv", "exit_code", "signal", "stdout", "stderr",
                          "duration_ms", "timed_out", "truncated", "termination_reason", "metrics",
                          "isolation_level", "enforcement", "transaction_id", "changes"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  for (const char* key :
       {"elapsed_ms", "cpu_time_ms", "peak_memory_bytes", "process_count", "output_bytes"}) {
    EXPECT_TRUE(json["metrics"].contains(key)) << key;
  }
  for (const char* key : {"network", "secrets", "filesystem", "limits", "syscalls"}) {
    EXPECT_TRUE(json["enforcement"][key].is_string()) << key;
  }
  EXPECT_EQ(json["termination_reason"], "oom");
  EXPECT_EQ(json["signal"], 9);
  // Output that is not UTF-8: readable text, and the exact bytes beside it.
  EXPECT_EQ(json["stderr"], "bad\\xff");
  EXPECT_EQ(json["stderr_base64"], "YmFk/w==");
  EXPECT_FALSE(json.contains("stdout_base64"));
  EXPECT_EQ(json["enforcement"]["network"], "strongly_enforced");
  EXPECT_EQ(json["enforcement"]["syscalls"], "unsupported");
  EXPECT_EQ(json["changes"][1]["kind"], "deleted");

  ProcessResult clean;
  const auto clean_json = nlohmann::json::parse(to_json(clean));
  EXPECT_TRUE(clean_json["termination_reason"].is_null());
  EXPECT_TRUE(clean_json["transaction_id"].is_null());
  EXPECT_TRUE(clean_json["signal"].is_null());
  EXPECT_TRUE(clean_json["changes"].empty());
}

TEST(ResultTest, LevelNamesRoundTrip) {
  for (auto level : {EnforcementLevel::StronglyEnforced, EnforcementLevel::PartiallyEnforced,
                     EnforcementLevel::Advisory, EnforcementLevel::Unsupported}) {
    EXPECT_EQ(parse_enforcement_level(to_string(level)), level);
  }
  EXPECT_FALSE(parse_enforcement_level("strong").has_value());
}

TEST(RandomHex, DigitsOfTheKernelsGenerator) {
  for (std::size_t digits : {1u, 6u, 16u, 33u}) {
    const std::string hex = core::random_hex(digits);
    EXPECT_EQ(hex.size(), digits);
    EXPECT_EQ(hex.find_first_not_of("0123456789abcdef"), std::string::npos) << hex;
  }
  // 200 run ids of 64 bits: any repeat means the generator is broken.
  std::set<std::string> seen;
  for (int i = 0; i < 200; ++i)
    seen.insert(core::random_hex(16));
  EXPECT_EQ(seen.size(), 200u);
  // Both halves of each byte are used.
  std::set<char> odd_digits;
  for (int i = 0; i < 200; ++i)
    odd_digits.insert(core::random_hex(2)[1]);
  EXPECT_GT(odd_digits.size(), 8u);
}

}  // namespace
}  // namespace pulsebox
