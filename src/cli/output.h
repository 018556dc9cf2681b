// Terminal output helpers for the CLI: colour only on a terminal (and never
// with NO_COLOR set), one-line errors on stderr.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pulsebox::cli {

enum class Colour { Red, Green, Yellow, Bold, Dim };

bool stdout_is_colour_terminal();
std::string paint(std::string_view text, Colour colour, bool enabled);

// "pulsebox: <message>" on stderr, escaped for a terminal (messages quote
// names and commands that may come from a sandbox; core::escape_for_terminal).
void print_error(std::string_view message);

// `message` with each of `names` that needs quoting (core::quote_name)
// replaced by its quoted form: for messages made elsewhere that hold names
// raw, so that a newline in a name shows as \n, not as a line of its own.
std::string quote_names_in(std::string message, std::vector<std::string> names);

}  // namespace pulsebox::cli
