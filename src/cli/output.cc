#include "cli/output.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

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
  std::cerr << "pulsebox: " << message << std::endl;
}

}  // namespace pulsebox::cli
