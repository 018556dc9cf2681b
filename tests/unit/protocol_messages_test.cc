// The protocol's message pieces (src/protocol): output chunks kept as text
// across split characters, run requests decoded with each refusal naming
// its field, library errors given their codes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "protocol/messages.h"
#include "protocol/run_request.h"
#include "pulsebox/error.h"

namespace pulsebox::protocol {
namespace {

TEST(Utf8JoinerTest, ACharacterSplitBetweenChunksStaysWhole) {
  Utf8Joiner joiner;
  EXPECT_EQ(joiner.take("caf\xC3"), "caf");
  EXPECT_EQ(joiner.take("\xA9 \xE2\x82"), "\xC3\xA9 ");
  EXPECT_EQ(joiner.take("\xAC!"), "\xE2\x82\xAC!");
  EXPECT_EQ(joiner.finish(), "");
  // Bytes that never become a character come out at the end, as they are.
  EXPECT_EQ(joiner.take("x\xF0\x9F"), "x");
  EXPECT_EQ(joiner.finish(), "\xF0\x9F");
  EXPECT_EQ(joiner.take("\xFF"), "\xFF");  // not a lead byte: nothing held
}

TEST(OutputEventTest, TextIsDataAndBytesAreBase64) {
  const auto text = nlohmann::json::parse(output_event("r", OutputStream::Stdout, "hi\n"));
  EXPECT_EQ(text["data"], "hi\n");
  EXPECT_FALSE(text.contains("data_base64"));
  const auto bytes =
      nlohmann::json::parse(output_event("r", OutputStream::Stderr, std::string("\xFF\x00", 2)));
  EXPECT_EQ(bytes["stream"], "stderr");
  EXPECT_EQ(bytes["data_base64"], "/wA=");
  EXPECT_FALSE(bytes.contains("data"));
}

TEST(RunRequestTest, FieldsBecomeTheRunsOptions) {
  const auto parsed =
      parse_run_request(std::string_view(R"({"v":1,"request":"run","argv":["make","-j2"],
      "cwd":"sub","env":{"CI":"1"},"secrets":{"TOKEN":"s3cr3t"},
      "limits":{"memory":"1G","pids":64,"cpus":1.5},"network":{"mode":"proxy",
      "allow_domains":["pypi.org"]},"policy":{"rules":[]},"changes":"discard",
      "approvals":"ask","stdin_base64":"aGk=","execution_id":"job-7"})"));
  ASSERT_TRUE(parsed) << parsed.error.message;
  const auto& request = *parsed.request;
  EXPECT_EQ(request.options.command, (std::vector<std::string>{"make", "-j2"}));
  EXPECT_EQ(request.options.cwd, "sub");
  EXPECT_EQ(request.options.env, (std::vector<std::string>{"CI=1"}));
  EXPECT_EQ(request.options.secrets, (std::vector<std::string>{"TOKEN"}));
  EXPECT_EQ(request.secret_environment.at("TOKEN"), "s3cr3t");
  EXPECT_EQ(request.options.memory, "1G");
  EXPECT_EQ(request.options.pids, "64");
  EXPECT_EQ(request.options.cpus, "1.5");
  EXPECT_EQ(request.options.net, "proxy");
  EXPECT_EQ(request.options.allow_domains, (std::vector<std::string>{"pypi.org"}));
  EXPECT_EQ(request.options.policy_json, R"({"rules":[]})");
  EXPECT_EQ(request.options.changes, "discard");
  EXPECT_EQ(request.approvals, ApprovalMode::Ask);
  EXPECT_EQ(request.stdin_bytes, "hi");
  EXPECT_EQ(request.execution_id, "job-7");
}

TEST(RunRequestTest, EachRefusalNamesItsField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"v":1})", "argv"},
      {R"({"v":1,"argv":[]})", "argv"},
      {R"({"v":1,"argv":["a",2]})", "argv[1]"},
      {R"({"v":1,"argv":["a"],"limits":{"memroy":"1G"}})", "limits.memroy"},
      {R"({"v":1,"argv":["a"],"limits":{"memory":true}})", "limits.memory"},
      {R"({"v":1,"argv":["a"],"seccomp":"/etc/profile.json"})", "seccomp"},
      {R"({"v":1,"argv":["a"],"binds":["/"]})", "binds"},
      {R"({"v":1,"argv":["a"],"workspace":"/w","workspace_upload":"sha256:00"})",
       "workspace_upload"},
      {R"({"v":1,"argv":["a"],"stdin_base64":"***"})", "stdin_base64"},
      {R"({"v":1,"argv":["a"],"execution_id":"../x"})", "execution_id"},
      {R"({"v":1,"argv":["a"],"env":{"A=B":"c"}})", "env.A=B"},
      {R"({"v":2,"argv":["a"]})", "v"},
  };
  for (const auto& [body, field] : cases) {
    const auto parsed = parse_run_request(std::string_view(body));
    ASSERT_FALSE(parsed) << body;
    EXPECT_EQ(parsed.error.field, field) << body << ": " << parsed.error.message;
    EXPECT_EQ(parsed.error.message.rfind(field, 0), 0u) << parsed.error.message;
  }
  const auto not_json = parse_run_request(std::string_view("{"));
  ASSERT_FALSE(not_json);
  EXPECT_EQ(not_json.error.code, ErrorCode::InvalidRequest);
}

TEST(ErrorFromExceptionTest, LibraryErrorsGetTheirCodesAndFields) {
  const auto memory = error_from_exception(SandboxConfigError("--memory: \"12x\" is not valid"));
  EXPECT_EQ(memory.code, ErrorCode::InvalidField);
  EXPECT_EQ(memory.field, "limits.memory");
  EXPECT_EQ(memory.message, "limits.memory: \"12x\" is not valid");
  EXPECT_EQ(error_from_exception(PolicyDenied("no")).code, ErrorCode::PolicyDenied);
  EXPECT_EQ(error_from_exception(SandboxUnsupportedPolicyError("no")).code,
            ErrorCode::UnsupportedPolicy);
  const auto conflict =
      error_from_exception(SandboxConcurrentModificationError("changed", {"a.txt"}));
  EXPECT_EQ(conflict.code, ErrorCode::Conflict);
  EXPECT_EQ(conflict.paths, std::vector<std::string>{"a.txt"});
  EXPECT_EQ(http_status(ErrorCode::Conflict), 409);
  const auto body = nlohmann::json::parse(error_response(memory));
  EXPECT_EQ(body["v"], 1);
  EXPECT_EQ(body["error"]["field"], "limits.memory");
}

}  // namespace
}  // namespace pulsebox::protocol
