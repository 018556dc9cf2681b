// The text form of nft_rules.h's requests, for the static CLI's
// `pulsebox-nft` helper (nft_rules_via_helper.cc): Debian ships libnftnl's
// libmnl only as a shared library, which a static executable cannot load, so
// that executable runs the helper (dynamically linked) for each nftables
// transaction. One line per item:
//   R <family> <hex bytes> <prefix> <protocol> <port or -1>   an EgressRule
//   L <family> <hex bytes> <prefix>                           an on-link prefix / a subnet
// The helper answers "OK", "TABLE <name>" lines, or "ERR <errno> <message>".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "linux/nft_rules.h"

namespace pulsebox::linux_api::nft_wire {

std::string encode(const std::vector<EgressRule>& rules, const std::vector<LinkAddress>& prefixes);
// Fails (kInvalidInput) on a malformed line.
core::Status decode(std::string_view text, std::vector<EgressRule>& rules,
                    std::vector<LinkAddress>& prefixes);
// "OK", or "ERR <errno> <message>" for an error.
std::string encode_status(const core::Status& status);
core::Status decode_status(std::string_view line, const std::string& stage);

}  // namespace pulsebox::linux_api::nft_wire
