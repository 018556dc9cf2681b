// The bounded readers every parser of outside input goes through:
// core::read_regular_file (regular files only, a size cap) and
// core::parse_json (nesting bounded before the JSON library sees the text).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <random>

#include "core/fs.h"
#include "core/json_parse.h"
#include "helpers/json_depth_reference.h"
#include "helpers/test_support.h"

namespace pulsebox::core {
namespace {

using testing::TempDir;

// A regression that blocks (a FIFO opened for reading) ends the test
// binary instead of hanging it.
class Deadline {
 public:
  Deadline() { ::alarm(20); }
  ~Deadline() { ::alarm(0); }
};

std::string nested(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

TEST(ReadRegularFile, ReadsUpToTheLimit) {
  TempDir dir;
  testing::write_file(dir / "p.json", "12345");
  auto exact = read_regular_file(dir / "p.json", 5, "policy file");
  ASSERT_TRUE(exact.ok()) << exact.error().to_string();
  EXPECT_EQ(*exact, "12345");
  auto over = read_regular_file(dir / "p.json", 4, "policy file");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().kind(), ErrorKind::kResource);
  EXPECT_EQ(over.error().stage(), "io");
  EXPECT_EQ(over.error().message(),
            "policy file " + (dir / "p.json").string() + " is 5 bytes, over the limit of 4 bytes");
}

TEST(ReadRegularFile, FollowsSymlinksToRegularFiles) {
  TempDir dir;
  testing::write_file(dir / "real.json", "{}");
  std::filesystem::create_symlink(dir / "real.json", dir / "link.json");
  auto read = read_regular_file(dir / "link.json", 100, "policy file");
  ASSERT_TRUE(read.ok()) << read.error().to_string();
  EXPECT_EQ(*read, "{}");
}

TEST(ReadRegularFile, RefusesWhatIsNotARegularFileWithoutBlocking) {
  Deadline deadline;
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  std::filesystem::create_symlink(dir / "fifo", dir / "to-fifo");
  const std::vector<std::pair<std::filesystem::path, std::string>> cases = {
      {dir / "fifo", "a FIFO"},
      {dir / "to-fifo", "a FIFO"},
      {"/dev/zero", "a character device"},
      {dir.path(), "a directory"},
  };
  for (const auto& [path, found] : cases) {
    auto read = read_regular_file(path, 1 << 20, "seccomp profile");
    ASSERT_FALSE(read.ok()) << path;
    EXPECT_EQ(read.error().kind(), ErrorKind::kInvalidInput) << path;
    EXPECT_EQ(read.error().stage(), "io");
    EXPECT_EQ(read.error().message(),
              "seccomp profile " + path.string() + " is " + found + ", not a regular file");
  }
}

TEST(ReadRegularFile, AMissingFileIsInvalidInputNamingIt) {
  TempDir dir;
  auto read = read_regular_file(dir / "none.json", 100, "policy file");
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(read.error().error_number(), ENOENT);
  EXPECT_NE(read.error().message().find("policy file " + (dir / "none.json").string()),
            std::string::npos);
}

TEST(JsonNesting, CountsBracketsOutsideStringsOnly) {
  EXPECT_EQ(json_nesting("1").depth, 0u);
  EXPECT_EQ(json_nesting("[]").depth, 1u);
  EXPECT_EQ(json_nesting("{\"a\": [1, {\"b\": []}]}").depth, 4u);
  EXPECT_EQ(json_nesting("[\"[[[[\", \"{{{\"]").depth, 1u);
  EXPECT_EQ(json_nesting(R"(["\"[[[", "\\", [["x"]]])").depth, 3u);
  EXPECT_EQ(json_nesting("[][][]").depth, 1u);
  EXPECT_EQ(json_nesting("]]]][[").depth, 2u);
}

TEST(JsonNesting, SaysWhereTheLimitIsFirstPassed) {
  const JsonNesting nesting = json_nesting("{\"a\": [[[1]]]}", 2);
  EXPECT_EQ(nesting.depth, 4u);
  EXPECT_EQ(nesting.offset_past_limit, 7u);
}

TEST(ParseJson, RefusesDeepNestingBeforeParsing) {
  auto deep = parse_json("{\"defaults\": " + nested(100000) + "}", "p.json");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error().kind(), ErrorKind::kInvalidInput);
  EXPECT_EQ(deep.error().message(),
            "p.json:1:77: JSON nested 100001 levels deep, over the limit of 64 (this document "
            "needs only a few)");
  EXPECT_TRUE(parse_json(nested(kMaxJsonDepth), "p.json").ok());
  EXPECT_FALSE(parse_json(nested(kMaxJsonDepth + 1), "p.json").ok());
  EXPECT_TRUE(parse_json(nested(10), "p.json", 10).ok());
  EXPECT_FALSE(parse_json(nested(11), "p.json", 10).ok());
}

// nlohmann ends the document at a NUL byte (found by json_depth_fuzz); the
// scan does not, so what follows one can only make it count more.
TEST(ParseJson, NestingAfterANulByteCountsToo) {
  const std::string text = std::string("{}\0", 3) + nested(100);
  EXPECT_EQ(json_nesting(text).depth, 100u);
  EXPECT_FALSE(parse_json(text, "p.json").ok());
}

TEST(ParseJson, SyntaxErrorsNameTheLineAndColumn) {
  auto bad = parse_json("{\n  \"a\": tru}", "p.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message().rfind("p.json:2:", 0), 0u) << bad.error().message();
  EXPECT_NE(bad.error().message().find("invalid JSON: syntax error"), std::string::npos);
  auto huge = parse_json("[1e99999]", "p.json");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.error().message(), "p.json: invalid JSON: a number is out of range");
}

// A manifest's entries are handed over one at a time and left out of the
// document, so 100,000 of them are never held as one; only the named
// top-level array's objects are, and the checks of parse_json still hold.
TEST(ParseJsonStreaming, HandsOverTheNamedArraysObjectsOnly) {
  std::vector<std::string> seen;
  auto document = parse_json_streaming(
      R"({"id": "t", "entries": [{"path": "a", "entries": [{"path": "inner"}]}, 7, {"path": "b"}],)"
      R"( "notes": [{"path": "n"}]})",
      "m.json", "entries",
      [&](nlohmann::json& item) { seen.push_back(item.at("path").get<std::string>()); });
  ASSERT_TRUE(document.ok()) << document.error().message();
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(document->at("entries"), nlohmann::json::parse("[7]"));  // left for the caller
  EXPECT_EQ(document->at("notes").size(), 1u);
  EXPECT_EQ(document->at("id"), "t");
}

TEST(ParseJsonStreaming, KeepsTheDepthLimitAndSyntaxErrors) {
  int calls = 0;
  const auto count = [&](nlohmann::json&) { ++calls; };
  EXPECT_FALSE(
      parse_json_streaming("{\"entries\": [" + nested(100000) + "]}", "m.json", "entries", count)
          .ok());
  auto bad = parse_json_streaming("{\"entries\": [{}, {]}", "m.json", "entries", count);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("invalid JSON: syntax error"), std::string::npos);
  EXPECT_EQ(calls, 1);  // the first object, before the error
}

// The same, parsed as a file is read (a manifest's text is never held
// whole): the same objects handed over, the same errors.
class ParseJsonFdStreaming : public ::testing::Test {
 protected:
  UniqueFd file_with(const std::string& text) {
    const auto path = dir_.path() / "m.json";
    testing::write_file(path, text);
    auto fd = open_regular_file(path, kDefaultReadLimit, "manifest");
    EXPECT_TRUE(fd.ok());
    return fd ? std::move(fd).value() : UniqueFd();
  }
  TempDir dir_;
};

TEST_F(ParseJsonFdStreaming, HandsOverTheNamedArraysObjectsOnly) {
  std::vector<std::string> seen;
  const UniqueFd fd = file_with(
      R"({"id": "t", "entries": [{"path": "a", "entries": [{"path": "inner"}]}, 7, {"path": "b"}],)"
      R"( "notes": [{"path": "n"}]})");
  auto document =
      parse_json_fd_streaming(fd.get(), kDefaultReadLimit, "m.json", "entries",
                              [&](nlohmann::json& item) { seen.push_back(item.at("path")); });
  ASSERT_TRUE(document.ok()) << document.error().message();
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(document->at("entries"), nlohmann::json::parse("[7]"));
  EXPECT_EQ(document->at("notes").size(), 1u);
  EXPECT_EQ(document->at("id"), "t");
}

TEST_F(ParseJsonFdStreaming, StopsAtTheDepthLimitWithParseJsonsErrors) {
  int calls = 0;
  const auto count = [&](nlohmann::json&) { ++calls; };
  const UniqueFd deep = file_with("{\"entries\": [{}, " + nested(100000) + "]}");
  auto refused = parse_json_fd_streaming(deep.get(), kDefaultReadLimit, "m.json", "entries", count);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(),
            "m.json:1:80: JSON nested 100002 levels deep, over the limit of 64 (this document "
            "needs only a few)");
  EXPECT_EQ(calls, 1);
  const UniqueFd bad = file_with("{\"entries\": [{},\n {]}");
  refused = parse_json_fd_streaming(bad.get(), kDefaultReadLimit, "m.json", "entries", count);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message().rfind("m.json:2:", 0), 0u) << refused.error().message();
  EXPECT_NE(refused.error().message().find("invalid JSON: syntax error"), std::string::npos);
  const UniqueFd limit = file_with(nested(kMaxJsonDepth));
  EXPECT_TRUE(parse_json_fd_streaming(limit.get(), kDefaultReadLimit, "m.json", "entries", count));
}

// Where the fd cannot seek back (a pipe), the error still names the limit.
TEST(ParseJsonFdStreamingPipe, RefusesDepthWithoutRereading) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const UniqueFd read_end(pipe_fds[0]);
  const std::string text = nested(100);
  ASSERT_EQ(::write(pipe_fds[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(pipe_fds[1]);
  auto refused = parse_json_fd_streaming(read_end.get(), kDefaultReadLimit, "p", "entries", {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message(),
            "p: JSON nested over 64 levels deep at byte 65, over the limit (this document needs "
            "only a few)");
}

// A file that grows past the limit while it is read is refused, never cut
// short: the text read so far may be a whole document.
TEST_F(ParseJsonFdStreaming, RefusesMoreThanTheLimit) {
  const UniqueFd fd = file_with("{\"entries\": []}" + std::string(100, ' '));
  auto refused = parse_json_fd_streaming(fd.get(), 20, "m.json", "entries", {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind(), ErrorKind::kResource);
  EXPECT_NE(refused.error().message().find("larger than the limit of 20 bytes"), std::string::npos)
      << refused.error().message();
}

nlohmann::json random_value(std::mt19937& random, int depth) {
  static const std::string kPieces[] = {"[", "]", "{", "}", "\"", "\\", "a", ":", ","};
  switch (depth > 6 ? 0 : random() % 4) {
    case 0: {
      std::string text;
      for (std::size_t i = random() % 5; i > 0; --i)
        text += kPieces[random() % std::size(kPieces)];
      return text;
    }
    case 1:
      return static_cast<int>(random() % 100);
    case 2: {
      nlohmann::json array = nlohmann::json::array();
      for (std::size_t i = random() % 4; i > 0; --i)
        array.push_back(random_value(random, depth + 1));
      return array;
    }
    default: {
      nlohmann::json object = nlohmann::json::object();
      for (std::size_t i = random() % 4; i > 0; --i)
        object[random_value(random, 7).get<std::string>()] = random_value(random, depth + 1);
      return object;
    }
  }
}

// The pre-scan must never see less nesting than the parser builds: random
// documents whose strings are full of brackets, quotes and backslashes,
// as written and with a byte changed (tests/fuzz/json_depth_fuzz.cc checks
// the same on fuzzed input).
TEST(JsonNesting, AgreesWithTheParserOnRandomDocuments) {
  std::mt19937 random(20261201);
  const std::string bytes = "[]{}\"\\:, a1";
  std::size_t mutated_and_accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string text = random_value(random, 0).dump();
    if (round % 2 == 1) text[random() % text.size()] = bytes[random() % bytes.size()];
    testing::SaxDepth sax;
    if (!nlohmann::json::sax_parse(text, &sax)) continue;
    if (round % 2 == 1) ++mutated_and_accepted;
    ASSERT_EQ(json_nesting(text).depth, sax.deepest) << text;
  }
  EXPECT_GT(mutated_and_accepted, 100u);
}

}  // namespace
}  // namespace pulsebox::core
