#include "cli/output.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "core/text.h"

namespace pulsebox::cli {

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
