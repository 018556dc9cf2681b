#include "network/domain_pattern.h"

#include <algorithm>

#include "network/address.h"

namespace pulsebox::network {
namespace {

bool ldh(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

// "" when `name` (already lowercase, no trailing dot) is a valid name, or
// what is wrong with it.
std::string name_problem(std::string_view name) {
  if (name.empty()) return "it is empty";
  if (name.size() > 253) return "it is longer than 253 bytes";
  if (parse_ip_address(name)) return "it is an IP address (use --allow ADDR for addresses)";
  std::string_view last;
  for (std::size_t start = 0; start <= name.size();) {
    const auto dot = std::min(name.find('.', start), name.size());
    const std::string_view label = name.substr(start, dot - start);
    if (label.empty()) return "it has an empty label";
    if (label.size() > 63) return "a label is longer than 63 bytes";
    for (const char c : label) {
      if (c == '*') return "'*' may only be the whole first label (\"*.example.com\")";
      if (!ldh(c)) return "it holds a character other than letters, digits, '-' and '.'";
    }
    if (label.front() == '-' || label.back() == '-') return "a label starts or ends with '-'";
    last = label;
    start = dot + 1;
  }
  if (last.find_first_not_of("0123456789") == std::string_view::npos)
    return "its last label is all digits (resolvers may read it as an address)";
  return "";
}

std::string lower_without_trailing_dot(std::string_view text) {
  if (!text.empty() && text.back() == '.') text.remove_suffix(1);
  std::string lower(text);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return lower;
}

}  // namespace

std::optional<std::string> normalise_host_name(std::string_view host) {
  std::string name = lower_without_trailing_dot(host);
  if (!name_problem(name).empty()) return std::nullopt;
  return name;
}

core::Result<DomainPattern> DomainPattern::parse(std::string_view pattern) {
  std::string name = lower_without_trailing_dot(pattern);
  const bool wildcard = name.starts_with("*.");
  if (wildcard) name.erase(0, 2);
  std::string problem = name_problem(name);
  if (name == "*" || pattern.empty()) problem = "it allows every name; list the domains instead";
  if (!problem.empty()) {
    // The pattern is the user's own flag value, shown back as they wrote it
    // (bounded, control characters would garble the terminal).
    std::string shown(pattern.substr(0, 80));
    for (char& c : shown) {
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
    return core::Error(core::ErrorKind::kInvalidInput, "network",
                       "--allow-domain \"" + shown + "\": " + problem);
  }
  return DomainPattern(std::move(name), wildcard);
}

bool DomainPattern::matches(std::string_view host) const {
  const auto name = normalise_host_name(host);
  if (!name) return false;
  if (!wildcard_) return *name == name_;
  return name->size() > name_.size() + 1 && name->ends_with(name_) &&
         (*name)[name->size() - name_.size() - 1] == '.';
}

std::string DomainPattern::text() const {
  return wildcard_ ? "*." + name_ : name_;
}

}  // namespace pulsebox::network
