// Transaction files read entry by entry from the parser's events
// (workspace/entry_stream.h): the same entries and the same rest of the
// document as parsing it whole and converting each entry gave, and a
// damaged file refused, never half read.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/byte_names.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "helpers/test_support.h"
#include "workspace/store_files.h"

namespace pulsebox::workspace {
namespace {

using nlohmann::json;
using testing::TempDir;
using testing::write_file;

std::string text_of(const Entry& e) {
  return json{{"path", core::to_hex(e.path)},
              {"op", std::string(to_string(e.op))},
              {"mode", e.mode},
              {"link_target", core::to_hex(e.link_target)},
              {"blob", e.blob},
              {"size", e.size},
              {"blob_inode", e.blob_inode},
              {"mtime_ns", e.mtime_ns},
              {"contains_secret", e.contains_secret},
              {"type", std::string(to_string(e.snapshot.type))},
              {"inode", e.snapshot.inode},
              {"device", e.snapshot.device},
              {"ssize", e.snapshot.size},
              {"smtime", e.snapshot.mtime_ns},
              {"ctime", e.snapshot.newest_ctime_ns},
              {"smode", e.snapshot.mode},
              {"sha256", e.snapshot.sha256},
              {"changed", e.snapshot.changed_during_run},
              {"base_blob", e.base_blob},
              {"base_link", core::to_hex(e.base_link)},
              {"redacted_link", core::to_hex(e.redacted_link)},
              {"base_redacted", e.base_redacted},
              {"base_withheld", e.base_withheld}}
      .dump();
}

class EntryStreamTest : public ::testing::Test {
 protected:
  std::filesystem::path file() const { return dir_.path() / "manifest.json"; }

  // Entries as the old reader gave them: the whole document parsed, each
  // entry converted with entry_from_json.
  std::vector<std::string> whole_document_entries() const {
    auto text = core::read_regular_file(file(), 1 << 24, "manifest");
    EXPECT_TRUE(text.ok());
    std::vector<std::string> out;
    const json document = json::parse(*text);
    for (const json& item : document.at("entries")) {
      if (item.is_object()) out.push_back(text_of(entry_from_json(item)));
    }
    return out;
  }
  core::Result<json> streamed(std::vector<std::string>& out) const {
    return read_entries(file(), "entries", [&](Entry&& e) { out.push_back(text_of(e)); });
  }
  std::string damage_of(const std::string& text) {
    write_file(file(), text);
    std::vector<std::string> out;
    auto read = streamed(out);
    EXPECT_FALSE(read.ok()) << text;
    return read.ok() ? "" : read.error().to_string();
  }

  TempDir dir_;
};

TEST_F(EntryStreamTest, WrittenEntriesReadBackAsTheWholeDocumentGivesThem) {
  Entries entries;
  Entry file_entry;
  file_entry.path = "dir/f\xff\xfe name";  // not UTF-8: kept as bytes
  file_entry.op = StagedOp::Write;
  file_entry.mode = 0644;
  file_entry.blob = "0/7";
  file_entry.size = 12345;
  file_entry.blob_inode = 99;
  file_entry.mtime_ns = -5;
  file_entry.contains_secret = true;
  file_entry.snapshot.type = NodeType::File;
  file_entry.snapshot.inode = 18446744073709551615ULL;
  file_entry.snapshot.size = 3;
  file_entry.snapshot.mtime_ns = 1700000000123456789;
  file_entry.snapshot.newest_ctime_ns = 1700000000999999999;
  file_entry.snapshot.mode = 0100600;
  file_entry.snapshot.sha256 = std::string(64, 'a');
  file_entry.snapshot.changed_during_run = true;
  file_entry.base_blob = "12";
  file_entry.base_redacted = true;
  entries[file_entry.path] = file_entry;
  Entry link;
  link.path = "quote\" and space";
  link.op = StagedOp::Symlink;
  link.link_target = "../t\x01\xc3";
  link.base_link = "old\xe2\x82";
  link.redacted_link = "[REDACTED]";
  entries[link.path] = link;
  Entry withheld;
  withheld.path = "big";
  withheld.op = StagedOp::Write;
  withheld.blob = "0/8";
  withheld.base_withheld = true;
  entries[withheld.path] = withheld;
  Entry gone;
  gone.path = "d";
  gone.op = StagedOp::Delete;
  entries[gone.path] = gone;
  const json head = {{"id", "tx-1"}, {"refused", {{{"path", "p"}, {"reason", "r"}}}}};
  ASSERT_TRUE(write_entries(file(), head, "entries", entries).ok());

  std::vector<std::string> out;
  auto document = streamed(out);
  ASSERT_TRUE(document.ok()) << document.error().to_string();
  EXPECT_EQ(out, whole_document_entries());
  EXPECT_EQ(out.size(), 4u);
  EXPECT_NE(out[0].find(R"("base_withheld":true)"), std::string::npos) << out[0];
  json expected = head;
  expected["entries"] = json::array();
  EXPECT_EQ(*document, expected);
}

// What is not an entry object stays in the document, exactly; keys an
// entry does not use are ignored whatever their values.
TEST_F(EntryStreamTest, TheRestOfTheDocumentIsKeptAndUnknownKeysIgnored) {
  const std::string snapshot =
      R"({"type":"absent","inode":0,"device":0,"size":0,"mtime_ns":0,"mode":0,"sha256":"",)"
      R"("future":{"a":[1,{"b":null}]}})";
  const std::string entry = R"({"path":"a","op":"mkdir","mode":493,"link_target":"","blob":"",)"
                            R"("size":0,"extra":[[{"x":1}]],"more":{"y":2.5},"snapshot":)" +
                            snapshot + "}";
  write_file(file(), R"({"version":1,"entries":[)" + entry + R"(,7,[{"z":1}]],)" +
                         R"("other":[{"entries":[1]}],"n":-3,"f":1.5,"t":true,"z":null})");
  std::vector<std::string> out;
  auto document = streamed(out);
  ASSERT_TRUE(document.ok()) << document.error().to_string();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out, whole_document_entries());
  EXPECT_EQ(*document,
            json::parse(R"({"version":1,"entries":[7,[{"z":1}]],)"
                        R"("other":[{"entries":[1]}],"n":-3,"f":1.5,"t":true,"z":null})"));
}

// As in a parsed document: a repeated key's last value counts, and only
// the top-level object's array holds entries.
TEST_F(EntryStreamTest, RepeatedKeysAndOtherArraysReadAsTheDocumentSays) {
  const std::string snapshot =
      R"({"type":"absent","inode":0,"device":0,"size":0,"mtime_ns":0,"mode":0,"sha256":""})";
  const std::string entry = R"({"path":"a","op":"mkdir","mode":493,"link_target":"","blob":"",)"
                            R"("size":0,"snapshot":)" +
                            snapshot;
  EXPECT_NE(damage_of(R"({"entries":[)" + entry + R"(,"snapshot":{"type":"absent"}}]})")
                .find("not found"),
            std::string::npos);
  const std::string text = R"([{"entries":1},[)" + entry + "}]]";
  write_file(file(), text);
  std::vector<std::string> out;
  auto document = streamed(out);
  ASSERT_TRUE(document.ok()) << document.error().to_string();
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(*document, json::parse(text));
}

TEST_F(EntryStreamTest, ADamagedFileIsRefusedWithWhy) {
  const std::string snapshot =
      R"("snapshot":{"type":"absent","inode":0,"device":0,"size":0,"mtime_ns":0,"mode":0,"sha256":""})";
  const auto with = [&](const std::string& fields) { return R"({"entries":[{)" + fields + "}]}"; };
  const std::string base =
      R"("path":"a","op":"mkdir","mode":493,"link_target":"","blob":"","size":0)";
  EXPECT_NE(damage_of(with(base)).find("key 'snapshot' not found"), std::string::npos);
  EXPECT_NE(
      damage_of(with(R"("op":"mkdir","mode":493,"link_target":"","blob":"","size":0,)" + snapshot))
          .find("key 'path' not found"),
      std::string::npos);
  EXPECT_NE(damage_of(with(R"("path":7,"op":"mkdir","mode":493,"link_target":"","blob":"",)"
                           R"("size":0,)" +
                           snapshot))
                .find("path has the wrong type"),
            std::string::npos);
  EXPECT_NE(
      damage_of(with(R"("path":"a","mode":493,"link_target":"","blob":"","size":0,)" + snapshot))
          .find("key 'op' not found"),
      std::string::npos);
  EXPECT_NE(damage_of(with(base + R"(,"snapshot":{"type":"absent"})")).find("not found"),
            std::string::npos);
  EXPECT_NE(damage_of(with(base + ",\"mode\":1.5," + snapshot)).find("mode has the wrong type"),
            std::string::npos);
  EXPECT_NE(damage_of(with(R"("path":"../up","op":"mkdir","mode":493,"link_target":"",)"
                           R"("blob":"","size":0,)" +
                           snapshot))
                .find("bad path"),
            std::string::npos);
  EXPECT_NE(damage_of(with(base + R"(,"path_hex":"zz",)" + snapshot)).find("is not hex"),
            std::string::npos);
  // Syntax and depth: the whole parser's own diagnostics.
  EXPECT_NE(damage_of(R"({"entries":[{"path":)").find("invalid JSON"), std::string::npos);
  EXPECT_NE(damage_of(R"({"entries":[)" + std::string(70, '[') + std::string(70, ']') + "]}")
                .find("levels deep"),
            std::string::npos);
}

// pulsebox writes entries from a map, in path order and once each. A file
// in any other order is damaged: a reader that acts on each entry as it
// comes (a diff printed as it is made) must see what a commit applies, the
// last of a repeated path, which it cannot know until the end.
TEST_F(EntryStreamTest, EntriesOutOfPathOrderOrRepeatedAreRefused) {
  const std::string snapshot =
      R"("snapshot":{"type":"absent","inode":0,"device":0,"size":0,"mtime_ns":0,"mode":0,"sha256":""})";
  const auto entry = [&](const std::string& path) {
    return R"({"path":")" + path + R"(","op":"mkdir","mode":493,"link_target":"","blob":"",)" +
           R"("size":0,)" + snapshot + "}";
  };
  const auto with = [](const std::vector<std::string>& entries) {
    std::string text = R"({"entries":[)";
    for (std::size_t i = 0; i < entries.size(); ++i)
      text += (i == 0 ? "" : ",") + entries[i];
    return text + "]}";
  };
  write_file(file(), with({entry("a"), entry("a-b"), entry("a/b"), entry("b")}));
  std::vector<std::string> out;
  ASSERT_TRUE(streamed(out).ok());
  EXPECT_EQ(out.size(), 4u);
  EXPECT_NE(damage_of(with({entry("b"), entry("a")})).find("not in path order (a after b)"),
            std::string::npos);
  EXPECT_NE(damage_of(with({entry("a"), entry("b"), entry("a")})).find("not in path order"),
            std::string::npos);
  EXPECT_NE(damage_of(with({entry("a"), entry("a")})).find("not in path order (a after a)"),
            std::string::npos);
  // The key twice: a parsed document keeps only the last value, the stream
  // would hand over both arrays' entries (or none of an object's).
  EXPECT_NE(damage_of(R"({"entries":[)" + entry("a") + R"(],"entries":[)" + entry("b") + "]}")
                .find("\"entries\" appears twice"),
            std::string::npos);
  EXPECT_NE(damage_of(R"({"entries":{"k":)" + entry("a") + R"(},"entries":[]})")
                .find("\"entries\" appears twice"),
            std::string::npos);
}

}  // namespace
}  // namespace pulsebox::workspace
