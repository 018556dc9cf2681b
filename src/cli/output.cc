#include "cli/output.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "core/text.h"

namespace pulsebox::cli {

bool stdout_is_colour_terminal() {
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && no_color[0] != '\0') return false;
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::string_view(term) == "dumb") return false;
  return ::isatty(STDOUT_FILENO) == 1;
}

std::string paint(std::string_view text, Colour colour, bool enabled) {
  if (!enabled) return std::string(text);
  const char* code = "";
  switch (colour) {
    case Colour::Red:
      code = "\033[31m";
      break;
    case Colour::Green:
      code = "\033[32m";
      break;
    case Colour::Yellow:
      code = "\033[33m";
      break;
    case Colour::Bold:
      code = "\033[1m";
      break;
    case Colour::Dim:
      code = "\033[2m";
      break;
  }
  return std::string(code) + std::string(text) + "\033[0m";
}

void print_error(std::string_view message) {
  std::cerr << "pulsebox: " << core::escape_for_terminal(message, /*keep_newlines=*/true)
            << std::endl;
}

std::string quote_names_in(std::string message, std::vector<std::string> names) {
  // Longest first: a name inside a longer one is replaced with that one.
  std::sort(names.begin(), names.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const auto& name : names) {
    const std::string quoted = core::quote_name(name);
    if (name.empty() || quoted == name) continue;
    for (auto at = message.find(name); at != std::string::npos;
         at = message.find(name, at + quoted.size())) {
      message.replace(at, name.size(), quoted);
    }
  }
  return message;
}

}  // namespace pulsebox::cli
