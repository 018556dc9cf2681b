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

}  // namespace pulsebox::cli
