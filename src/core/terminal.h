// Colour for people: only on a terminal, and never with NO_COLOR set or
// TERM=dumb. (Escaping what a sandbox chose is core::quote_name and
// core::escape_for_terminal, core/text.h.)
#pragma once

#include <string>
#include <string_view>

namespace pulsebox::core {

enum class Colour { Red, Green, Yellow, Bold, Dim };

// `fd` is a terminal and the environment allows colour (`no_color`: the
// value of NO_COLOR, `term`: of TERM, null when unset).
bool colour_allowed(int fd, const char* no_color, const char* term);
// The same for this process's stdout and environment.
bool stdout_is_colour_terminal();
std::string paint(std::string_view text, Colour colour, bool enabled);

}  // namespace pulsebox::core
