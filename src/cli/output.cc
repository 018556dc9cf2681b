#include "cli/output.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "core/text.h"

namespace pulsebox::cli {

void print_error(std::string_view message) {
  std::cerr << "pulsebox: " << core::escape_for_terminal(message, /*keep_newlines=*/true)
            << std::endl;
}

}  // namespace pulsebox::cli
