#include <gtest/gtest.h>

#include "helpers/test_support.h"
#include "pulsebox/error.h"
#include "pulsebox/policy.h"

namespace pulsebox {
namespace {

using testing::TempDir;

TEST(ActionPolicyTest, ReferenceDefaults) {
  ActionPolicy policy;
  EXPECT_EQ(policy.evaluate(ActionType::Read, "a.txt"), Decision::Allow);
  for (ActionType denied : {ActionType::Write, ActionType::Delete, ActionType::Rename,
                            ActionType::Shell, ActionType::Network, ActionType::Secrets}) {
    EXPECT_EQ(policy.evaluate(denied, "a.txt"), Decision::Deny) << to_string(denied);
  }
  EXPECT_EQ(policy.evaluate(ActionType::Git, "status"), Decision::Ask);
  EXPECT_EQ(policy.evaluate(ActionType::Python, "x.py"), Decision::Ask);
  EXPECT_TRUE(policy.is_allowed(ActionType::Read));
  EXPECT_FALSE(policy.is_allowed(ActionType::Git));
  EXPECT_TRUE(policy.requires_approval(ActionType::Git));
}

TEST(ActionPolicyTest, MissingDefaultDenies) {
  ActionPolicy policy;
  policy.clear_defaults();
  const auto evaluation = policy.explain(ActionType::Read, "a");
  EXPECT_EQ(evaluation.decision, Decision::Deny);
  EXPECT_EQ(evaluation.source, PolicyEvaluation::Source::Fallback);
}

TEST(ActionPolicyTest, NewestRuleWins) {
  ActionPolicy policy;
  policy.add_rule({ActionType::Write, "src/*", Decision::Allow, "sources"});
  policy.add_rule({ActionType::Write, "src/generated/*", Decision::Deny, "generated"});
  EXPECT_EQ(policy.evaluate(ActionType::Write, "src/main.cc"), Decision::Allow);
  const auto generated = policy.explain(ActionType::Write, "src/generated/x.cc");
  EXPECT_EQ(generated.decision, Decision::Deny);
  ASSERT_TRUE(generated.rule_index.has_value());
  EXPECT_EQ(*generated.rule_index, 0u);
  EXPECT_EQ(generated.rule->reason, "generated");
  // The older rule still applies where the newer one does not match.
  EXPECT_EQ(policy.rules().size(), 2u);
  EXPECT_EQ(policy.rules()[1].reason, "sources");
}

TEST(ActionPolicyTest, WildcardActionRuleMatchesEveryAction) {
  ActionPolicy policy;
  policy.add_rule({std::nullopt, "secret/*", Decision::Deny, "no"});
  EXPECT_EQ(policy.evaluate(ActionType::Read, "secret/key"), Decision::Deny);
  EXPECT_EQ(policy.evaluate(ActionType::Read, "public/key"), Decision::Allow);
}

TEST(ActionPolicyTest, RuleForOtherActionDoesNotApply) {
  ActionPolicy policy;
  policy.add_rule({ActionType::Write, "*", Decision::Allow, ""});
  EXPECT_EQ(policy.evaluate(ActionType::Delete, "a"), Decision::Deny);
}

TEST(ActionPolicyTest, TargetsAreNormalisedBeforeMatching) {
  ActionPolicy policy;
  policy.add_rule({ActionType::Write, "Secrets/*", Decision::Deny, ""});
  policy.add_rule({ActionType::Write, "*", Decision::Allow, ""});
  // The newest rule (allow everything) wins; check normalisation via a deny-only policy.
  ActionPolicy deny_only;
  deny_only.set_default(ActionType::Write, Decision::Allow);
  deny_only.add_rule({ActionType::Write, "Secrets/*", Decision::Deny, ""});
  for (const char* target : {"secrets/a", "SECRETS/a", "/secrets/a", "secrets//a", "\\secrets\\a",
                             "c:\\Secrets\\a", "secrets/a/", "//secrets///a"}) {
    EXPECT_EQ(deny_only.evaluate(ActionType::Write, target), Decision::Deny) << target;
  }
  EXPECT_EQ(deny_only.evaluate(ActionType::Write, "other/a"), Decision::Allow);
}

TEST(ActionPolicyTest, UnicodeTargetsAreNfcAndLowerCased) {
  ActionPolicy policy;
  policy.set_default(ActionType::Write, Decision::Allow);
  policy.add_rule({ActionType::Write, "caf\u00e9/*", Decision::Deny, "composed"});
  // Decomposed e + combining acute, upper case.
  EXPECT_EQ(policy.evaluate(ActionType::Write, "CAFE\u0301/menu"), Decision::Deny);
  EXPECT_EQ(normalize_policy_target("CAFE\u0301"), std::optional<std::string>("caf\u00e9"));
}

TEST(ActionPolicyTest, NamesThatAreNotUtf8AreMatchedByteForByte) {
  ActionPolicy policy;
  // add_rule puts a rule first: the deny rules come before the "*".
  policy.add_rule({ActionType::Write, "*", Decision::Allow, ""});
  policy.add_rule({ActionType::Write, "*.pem", Decision::Deny, ""});
  policy.add_rule({ActionType::Write, "secret?.txt", Decision::Deny, "one character"});
  // Each malformed byte is one character: '?' matches it, '*' spans it.
  EXPECT_EQ(policy.evaluate(ActionType::Write, std::string("secret\xff.txt")), Decision::Deny);
  EXPECT_EQ(policy.evaluate(ActionType::Write, std::string("key\xfe\xff.pem")), Decision::Deny);
  EXPECT_EQ(policy.evaluate(ActionType::Write, std::string("bad\xff\xfe.txt")), Decision::Allow);
  // Two names never share a spelling (U+FFFD would merge these).
  EXPECT_NE(normalize_policy_target(std::string("a\xff")),
            normalize_policy_target(std::string("a\xfe")));
  EXPECT_NE(normalize_policy_target(std::string("a\xff")),
            normalize_policy_target(std::string("a\xef\xbf\xbd")));
}

TEST(ActionPolicyTest, ParentPolicyBeforeOwnDefaults) {
  auto parent = std::make_shared<ActionPolicy>();
  parent->add_rule({ActionType::Write, "docs/*", Decision::Allow, "parent allows docs"});
  ActionPolicy child;
  child.set_parent(parent);
  child.add_rule({ActionType::Write, "docs/private/*", Decision::Deny, "child"});
  EXPECT_EQ(child.evaluate(ActionType::Write, "docs/private/a"), Decision::Deny);
  const auto inherited = child.explain(ActionType::Write, "docs/readme");
  EXPECT_EQ(inherited.decision, Decision::Allow);
  EXPECT_EQ(inherited.source, PolicyEvaluation::Source::Parent);
}

TEST(ActionPolicyTest, DescribeNamesTheRule) {
  ActionPolicy policy;
  policy.add_rule({ActionType::Write, ".git/hooks/**", Decision::Deny, "hooks run on the host"});
  EXPECT_EQ(policy.explain(ActionType::Write, ".git/hooks/pre-commit").describe(),
            "deny by rule #1 (write \".git/hooks/**\": hooks run on the host)");
  EXPECT_EQ(policy.explain(ActionType::Read, "x").describe(),
            "allow by the default for this action");
}

TEST(GlobTest, FnmatchSemantics) {
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("*", "a/b/c"));  // '*' crosses '/', as fnmatch does
  EXPECT_TRUE(glob_match("src/*", "src/a/b.cc"));
  EXPECT_FALSE(glob_match("src/*", "src"));
  EXPECT_TRUE(glob_match(".git/hooks/**", ".git/hooks/pre-commit"));
  EXPECT_FALSE(glob_match(".git/hooks/**", ".git/hooksx"));
  EXPECT_TRUE(glob_match("a?c", "abc"));
  EXPECT_FALSE(glob_match("a?c", "ac"));
  EXPECT_TRUE(glob_match("*.[ch]", "x.c"));
  EXPECT_TRUE(glob_match("*.[ch]", "x.h"));
  EXPECT_FALSE(glob_match("*.[ch]", "x.o"));
  EXPECT_TRUE(glob_match("*.[!ch]", "x.o"));
  EXPECT_TRUE(glob_match("[a-c]x", "bx"));
  EXPECT_FALSE(glob_match("[a-c]x", "dx"));
  EXPECT_TRUE(glob_match("[]]", "]"));
  EXPECT_TRUE(glob_match("a[", "a["));  // unterminated set is a literal
  EXPECT_TRUE(glob_match("*a*b*c", "xxaxxbxxc"));
  EXPECT_FALSE(glob_match("*a*b*c", "xxaxxcxxb"));
  EXPECT_TRUE(glob_match("caf?", "caf\u00e9"));  // '?' is one character, not one byte
}

TEST(GlobTest, PathologicalPatternStaysPolynomial) {
  // Exponential backtracking would never finish this within the test timeout.
  const std::string text(5000, 'a');
  EXPECT_FALSE(glob_match("*a*a*a*a*a*a*a*a*a*a*a*b", text));
}

TEST(PolicyJsonTest, RoundTripKeepsOrderDefaultsAndReasons) {
  ActionPolicy policy;
  policy.set_default(ActionType::Shell, Decision::Ask);
  policy.add_rule({ActionType::Write, "src/*", Decision::Allow, "sources"});
  policy.add_rule({std::nullopt, ".env", Decision::Deny, "secrets file"});
  const ActionPolicy loaded = ActionPolicy::from_json(policy.to_json(), "mem");
  EXPECT_EQ(loaded.rules(), policy.rules());
  for (ActionType action : kAllActionTypes) {
    EXPECT_EQ(loaded.default_for(action), policy.default_for(action)) << to_string(action);
  }
}

TEST(PolicyJsonTest, ReferenceFormatLoadsInPriorityOrder) {
  const ActionPolicy policy = ActionPolicy::from_json(R"({
    "defaults": {"write": "ask"},
    "rules": [
      {"action": "write", "target": "src/secret/*", "decision": "deny", "reason": "first wins"},
      {"action": "write", "target": "src/*", "decision": "allow"}
    ]})");
  EXPECT_EQ(policy.evaluate(ActionType::Write, "src/secret/k"), Decision::Deny);
  EXPECT_EQ(policy.evaluate(ActionType::Write, "src/main.cc"), Decision::Allow);
  EXPECT_EQ(policy.evaluate(ActionType::Write, "other"), Decision::Ask);
  // Defaults not in the file keep the reference values.
  EXPECT_EQ(policy.evaluate(ActionType::Read, "x"), Decision::Allow);
  EXPECT_EQ(policy.evaluate(ActionType::Git, "x"), Decision::Ask);
}

void expect_config_error(const std::string& json, const std::string& expected_fragment) {
  try {
    (void)ActionPolicy::from_json(json, "p.json");
    ADD_FAILURE() << "no error for " << json;
  } catch (const SandboxConfigError& error) {
    EXPECT_NE(std::string(error.what()).find(expected_fragment), std::string::npos)
        << "message: " << error.what();
    EXPECT_EQ(std::string(error.what()).rfind("p.json", 0), 0u) << error.what();
  }
}

TEST(PolicyJsonTest, ErrorsNameTheFieldAndExpectation) {
  expect_config_error(
      R"({"rules": [{"action": "write", "target": "x", "decision": "maybe"}]})",
      "rules[0].decision: expected one of \"allow\", \"deny\", \"ask\", got \"maybe\"");
  expect_config_error(R"({"rules": [{"action": "fly", "decision": "allow"}]})",
                      "rules[0].action: expected \"*\" or one of");
  expect_config_error(R"({"rules": [{"action": "read", "decison": "allow"}]})",
                      "rules[0].decison: unknown key");
  expect_config_error(R"({"rules": [{"action": "read"}]})", "rules[0].decision: missing");
  expect_config_error(R"({"rules": [{"decision": "deny"}]})", "rules[0].action: missing");
  expect_config_error(R"({"defaults": {"swim": "allow"}})", "defaults.swim: unknown action");
  expect_config_error(R"({"defaults": {"read": 1}})",
                      "defaults.read: expected a string, got number 1");
  expect_config_error(R"({"rules": {"a": 1}})", "rules: expected an array");
  expect_config_error(R"({"rule": []})", "rule: unknown key");
  expect_config_error(R"([1, 2])", "(top level): expected an object");
  expect_config_error(R"({"rules": [{"action": "read", "target": "", "decision": "deny"}]})",
                      "rules[0].target: expected a non-empty pattern");
}

TEST(PolicyJsonTest, SyntaxErrorGivesLineAndColumn) {
  expect_config_error("{\n  \"rules\": [\n    {\"action\": \"read\",,}\n  ]\n}", "p.json:3:");
}

// Found by the fuzzer: nlohmann throws out_of_range, not parse_error, here.
TEST(PolicyJsonTest, HugeNumberIsAnErrorNotACrash) {
  expect_config_error("{\"defaults\": {\"read\": 1e99999}}", "invalid JSON");
}

TEST(PolicyJsonTest, FileLoadAndSave) {
  TempDir dir;
  ActionPolicy policy;
  policy.add_rule({ActionType::Delete, "build/*", Decision::Allow, "build outputs"});
  policy.save_file(dir / "policy.json");
  const ActionPolicy loaded = ActionPolicy::load_file(dir / "policy.json");
  EXPECT_EQ(loaded.rules(), policy.rules());
  EXPECT_THROW((void)ActionPolicy::load_file(dir / "missing.json"), SandboxConfigError);
  try {
    (void)ActionPolicy::load_file(dir / "missing.json");
  } catch (const SandboxConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("missing.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace pulsebox
