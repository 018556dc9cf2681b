#include "core/terminal.h"

#include <unistd.h>

#include <cstdlib>

namespace pulsebox::core {

bool colour_allowed(int fd, const char* no_color, const char* term) {
  if (no_color != nullptr && no_color[0] != '\0') return false;
  if (term != nullptr && std::string_view(term) == "dumb") return false;
  return ::isatty(fd) == 1;
}

bool stdout_is_colour_terminal() {
  return colour_allowed(STDOUT_FILENO, std::getenv("NO_COLOR"), std::getenv("TERM"));
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

}  // namespace pulsebox::core
