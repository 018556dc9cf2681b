// Terminal output helpers for the CLI: one-line errors on stderr (colour is
// core/terminal.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/terminal.h"

namespace pulsebox::cli {

using core::Colour;
using core::paint;
using core::stdout_is_colour_terminal;

// "pulsebox: <message>" on stderr, escaped for a terminal (messages quote
// names and commands that may come from a sandbox; core::escape_for_terminal).
void print_error(std::string_view message);

// `message` with each of `names` that needs quoting (core::quote_name)
// replaced by its quoted form: for messages made elsewhere that hold names
// raw, so that a newline in a name shows as \n, not as a line of its own.
std::string quote_names_in(std::string message, std::vector<std::string> names);

}  // namespace pulsebox::cli
