// An interface address or a prefix, as netlink and nftables take it.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>

namespace pulsebox::linux_api {

struct LinkAddress {
  int family = AF_INET;                  // AF_INET or AF_INET6
  std::array<std::uint8_t, 16> bytes{};  // network order; the first 4 for AF_INET
  int prefix = 32;                       // bits
};

// 4 for AF_INET, 16 for AF_INET6, 0 for anything else.
constexpr std::size_t address_length(int family) {
  return family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
}

}  // namespace pulsebox::linux_api
