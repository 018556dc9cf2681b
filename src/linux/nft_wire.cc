#include "linux/nft_wire.h"

#include <charconv>
#include <sstream>

namespace pulsebox::linux_api::nft_wire {
namespace {

std::string hex(const LinkAddress& address) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  for (std::size_t i = 0; i < address_length(address.family); ++i) {
    text += kDigits[address.bytes[i] >> 4];
    text += kDigits[address.bytes[i] & 15];
  }
  return text;
}

bool unhex(std::string_view text, LinkAddress& address) {
  if (text.size() != 2 * address_length(address.family)) return false;
  for (std::size_t i = 0; i < text.size() / 2; ++i) {
    unsigned value = 0;
    const auto [end, error] =
        std::from_chars(text.data() + 2 * i, text.data() + 2 * i + 2, value, 16);
    if (error != std::errc() || end != text.data() + 2 * i + 2) return false;
    address.bytes[i] = static_cast<std::uint8_t>(value);
  }
  return true;
}

std::string address_fields(const LinkAddress& address) {
  return std::to_string(address.family) + " " + hex(address) + " " + std::to_string(address.prefix);
}

}  // namespace

std::string encode(const std::vector<EgressRule>& rules, const std::vector<LinkAddress>& prefixes) {
  std::string text;
  for (const auto& rule : rules) {
    text += "R " + address_fields(rule.destination) + " " + std::to_string(rule.protocol) + " " +
            std::to_string(rule.port ? static_cast<int>(*rule.port) : -1) + "\n";
  }
  for (const auto& prefix : prefixes)
    text += "L " + address_fields(prefix) + "\n";
  return text;
}

core::Status decode(std::string_view text, std::vector<EgressRule>& rules,
                    std::vector<LinkAddress>& prefixes) {
  std::istringstream in{std::string(text)};
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    std::istringstream fields(line);
    std::string kind, bytes;
    LinkAddress address{};
    fields >> kind >> address.family >> bytes >> address.prefix;
    const bool family_ok = address.family == AF_INET || address.family == AF_INET6;
    bool ok = fields && family_ok && unhex(bytes, address) && address.prefix >= 0 &&
              address.prefix <= static_cast<int>(8 * address_length(address.family));
    if (ok && kind == "R") {
      EgressRule rule;
      rule.destination = address;
      int port = -1;
      fields >> rule.protocol >> port;
      ok = static_cast<bool>(fields) && port >= -1 && port <= 65535;
      if (port >= 0) rule.port = static_cast<std::uint16_t>(port);
      if (ok) rules.push_back(rule);
    } else if (ok && kind == "L") {
      prefixes.push_back(address);
    } else {
      ok = false;
    }
    if (!ok) {
      return core::Error(core::ErrorKind::kInvalidInput, "nftables",
                         "request line " + std::to_string(number) + " is malformed");
    }
  }
  return core::ok_status();
}

std::string encode_status(const core::Status& status) {
  if (status) return "OK";
  std::string message = status.error().to_string();
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  return "ERR " + std::to_string(status.error().error_number()) + " " + message;
}

core::Status decode_status(std::string_view line, const std::string& stage) {
  if (line == "OK") return core::ok_status();
  if (line.substr(0, 4) == "ERR ") {
    line.remove_prefix(4);
    int error_number = 0;
    const auto [end, error] = std::from_chars(line.data(), line.data() + line.size(), error_number);
    const auto used = static_cast<std::size_t>(end - line.data());
    const std::string_view message = used < line.size() ? line.substr(used + 1) : "";
    if (error == std::errc()) {
      return core::Error(core::ErrorKind::kUnavailable, stage, std::string(message), error_number);
    }
  }
  return core::Error(core::ErrorKind::kInternal, stage,
                     "the pulsebox-nft helper answered \"" + std::string(line) + "\"");
}

}  // namespace pulsebox::linux_api::nft_wire
