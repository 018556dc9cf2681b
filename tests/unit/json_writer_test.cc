// core::JsonObjectWriter: what it writes parses to exactly what nlohmann's
// own objects (and core::put_name for file names) would have written, for
// every byte that can be in a string.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/byte_names.h"
#include "core/json_writer.h"

namespace pulsebox::core {
namespace {

using nlohmann::json;

TEST(JsonObjectWriter, EveryCharacterRoundTripsAsNlohmannWritesIt) {
  std::string every;  // every byte but the UTF-8 lead/continuation range
  for (int c = 1; c < 0x80; ++c)
    every += static_cast<char>(c);
  const std::vector<std::string> texts = {"",         every,       "quote \" and \\ back",
                                          "é ü 字 😀", "tab\there", std::string("nul\0in", 6)};
  for (const std::string& text : texts) {
    std::string out;
    JsonObjectWriter writer(out);
    writer.field("text", text);
    writer.finish();
    const json parsed = json::parse(out);
    EXPECT_EQ(parsed, (json{{"text", text}})) << out;
  }
}

TEST(JsonObjectWriter, NumbersBooleansAndNestedObjects) {
  std::string out;
  JsonObjectWriter writer(out);
  writer.field("max", std::uint64_t{18446744073709551615ULL});
  writer.field("min", std::int64_t{-9223372036854775807LL - 1});
  writer.field("mode", 0755u);
  writer.field("yes", true);
  writer.begin_object("inner");
  writer.field("no", false);
  writer.begin_object("empty");
  writer.end_object();
  writer.end_object();
  writer.field("after", "x");
  writer.finish();
  const json parsed = json::parse(out);
  EXPECT_EQ(parsed.at("max").get<std::uint64_t>(), 18446744073709551615ULL);
  EXPECT_EQ(parsed.at("min").get<std::int64_t>(), -9223372036854775807LL - 1);
  EXPECT_EQ(parsed.at("mode").get<unsigned>(), 0755u);
  EXPECT_EQ(parsed.at("yes"), true);
  EXPECT_EQ(parsed.at("inner"), (json{{"no", false}, {"empty", json::object()}}));
  EXPECT_EQ(parsed.at("after"), "x");
  std::string empty;
  JsonObjectWriter nothing(empty);
  nothing.finish();
  EXPECT_EQ(empty, "{}");
}

// A name that is not UTF-8 is kept exactly, as put_name keeps it.
TEST(JsonObjectWriter, NamesKeepTheirBytesAsPutNameDoes) {
  for (const std::string& name : {std::string("plain/name.txt"), std::string("bad\xff\xfe"),
                                  std::string("half \xe2\x82"), std::string("ctl\x01\n")}) {
    std::string out;
    JsonObjectWriter writer(out);
    writer.name("path", name);
    writer.finish();
    json expected = json::object();
    put_name(expected, "path", name);
    const json parsed = json::parse(out);
    EXPECT_EQ(parsed, expected) << out;
    EXPECT_EQ(get_name(parsed, "path"), name);
  }
}

// The scrubber looks for a secret as JSON encoders write it, '/' escaped or not.
TEST(JsonEscaped, SlashesOnlyWhenAsked) {
  std::string plain, slashed;
  append_json_escaped(plain, "a/b\"\x01");
  append_json_escaped(slashed, "a/b\"\x01", /*escape_slash=*/true);
  EXPECT_EQ(plain, "a/b\\\"\\u0001");
  EXPECT_EQ(slashed, "a\\/b\\\"\\u0001");
  EXPECT_EQ(json::parse("\"" + slashed + "\""), "a/b\"\x01");
}

TEST(JsonObjectWriter, AFieldThatIsNotUtf8IsRefusedNotChanged) {
  std::string out;
  JsonObjectWriter writer(out);
  EXPECT_THROW(writer.field("blob", std::string("\xff")), std::invalid_argument);
}

}  // namespace
}  // namespace pulsebox::core
