// Validating protocol messages (schema_check.h).
#include "helpers/schema_check.h"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "helpers/test_support.h"

namespace pulsebox::testing {

std::string schema_problems(const std::string& kind, const std::vector<std::string>& messages) {
  const char* validator = std::getenv("PULSEBOX_SCHEMA_VALIDATOR");
  const char* schemas = std::getenv("PULSEBOX_SCHEMA_DIR");
  if (validator == nullptr || schemas == nullptr) {
    return "PULSEBOX_SCHEMA_VALIDATOR and PULSEBOX_SCHEMA_DIR are not set (meson test sets them)";
  }
  TempDir scratch;
  const auto input = scratch.path() / "messages.jsonl";
  const auto report = scratch.path() / "report";
  std::string text;
  for (const auto& message : messages)
    text += message + "\n";
  write_file(input, text);
  const std::string command = std::string("/usr/bin/python3 ") + validator + " " + schemas + " " +
                              kind + " < " + input.string() + " > " + report.string() + " 2>&1";
  const int status = std::system(command.c_str());
  if (status == 0) return "";
  return "validator exit " + std::to_string(status) + ": " + read_file(report);
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

}  // namespace pulsebox::testing
