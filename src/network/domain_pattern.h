// An --allow-domain pattern: which host names the proxy lets through.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace pulsebox::network {

// A host name in the form patterns and hosts are compared in: lowercase,
// one trailing dot removed, letters/digits/'-' labels (no label over 63
// bytes or starting or ending with '-', 253 bytes in all), and not an IP
// address. nullopt when `host` is not such a name.
std::optional<std::string> normalise_host_name(std::string_view host);

class DomainPattern {
 public:
  // "api.example.test" allows exactly that name; "*.example.test" allows
  // every name below example.test ("a.example.test", "a.b.example.test")
  // but not example.test itself: list it too if it should be reachable.
  // Refused with kInvalidInput naming the pattern: an empty or bare "*"
  // pattern, '*' anywhere but as the whole first label, an IP address, a
  // name that is not letters/digits/'-' labels, or whose last label is all
  // digits (resolvers read "127.1" as an address).
  static core::Result<DomainPattern> parse(std::string_view pattern);

  // `host` normalised as above; a host that does not normalise never matches.
  bool matches(std::string_view host) const;

  // The normalised pattern ("*.example.test").
  std::string text() const;

 private:
  DomainPattern(std::string name, bool wildcard) : name_(std::move(name)), wildcard_(wildcard) {}
  std::string name_;  // without the "*." of a wildcard
  bool wildcard_;
};

}  // namespace pulsebox::network
