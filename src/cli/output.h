// Terminal output helpers for the CLI: colour only on a terminal (and never
// with NO_COLOR set), one-line errors on stderr.
#pragma once

#include <string>
#include <string_view>

namespace pulsebox::cli {

enum class Colour { Red, Green, Yellow, Bold, Dim };

bool stdout_is_colour_terminal();
std::string paint(std::string_view text, Colour colour, bool enabled);

// "pulsebox: <message>" on stderr.
void print_error(std::string_view message);

}  // namespace pulsebox::cli
