// libFuzzer target: the path validator's lexical parser. Anything it accepts
// is relative, free of "..", NUL and backslashes, and already normalised.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "workspace/safe_open.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view path(reinterpret_cast<const char*>(data), size);
  auto checked = pulsebox::workspace::check_relative_path(path);
  if (!checked.ok()) return 0;
  const std::string& normalized = *checked;
  if (normalized.empty() || normalized.front() == '/' || normalized.back() == '/') std::abort();
  if (normalized.find('\0') != std::string::npos || normalized.find('\\') != std::string::npos) {
    std::abort();
  }
  if (normalized.find("//") != std::string::npos) std::abort();
  std::size_t start = 0;
  while (start <= normalized.size()) {
    std::size_t end = normalized.find('/', start);
    if (end == std::string::npos) end = normalized.size();
    const std::string_view part(normalized.data() + start, end - start);
    if (part == ".." || part == "." || part.empty()) std::abort();
    start = end + 1;
  }
  auto again = pulsebox::workspace::check_relative_path(normalized);
  if (!again.ok() || *again != normalized) std::abort();
  return 0;
}
