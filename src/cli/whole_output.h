// Standard output printed whole or not at all, for a command whose output is
// made piece by piece and can fail part way (`pulsebox diff`).
//
// Usage: construct, write() each piece, then finish() once all of it is
// made. To a terminal the pieces go out as they come: a person reads the
// error that ends them. Piped or redirected, they are held in an unnamed
// file in $TMPDIR (not in this process's memory: a diff can be larger than
// RAM) and copied out by finish(); a failure before finish() prints none of
// them, so `pulsebox diff TX | git apply` never applies part of a diff that
// failed.
#pragma once

#include <filesystem>
#include <string_view>

#include "core/unique_fd.h"

namespace pulsebox::cli {

class WholeOutput {
 public:
  // Piped output is held in the temporary directory ($TMPDIR, or /tmp).
  // Throws SandboxError when it cannot be (no file can be made there).
  WholeOutput();
  // Whether the pieces go straight to the terminal.
  bool to_terminal() const { return !held_; }
  void write(std::string_view piece);
  // Prints what was held; throws SandboxError when it cannot.
  void finish();

 private:
  std::filesystem::path held_in_;  // the directory of held_
  core::UniqueFd held_;
};

}  // namespace pulsebox::cli
