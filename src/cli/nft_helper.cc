// pulsebox-nft: the static pulsebox executable's nftables transactions
// (linux/nft_wire.h says why it exists and what it reads). Dynamically
// linked, run by pulsebox only, one transaction per run:
//   pulsebox-nft egress                   fd 3: the sandbox's NETLINK_NETFILTER
//                                          socket; stdin: R and L lines
//   pulsebox-nft masquerade TABLE LINK    stdin: L lines (the subnets)
//   pulsebox-nft delete TABLE
//   pulsebox-nft list PREFIX
// It prints "OK" (list: "TABLE name" lines first) or "ERR errno message".
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "linux/nft_rules.h"
#include "linux/nft_wire.h"

namespace {

using namespace pulsebox;
using namespace pulsebox::linux_api;

int answer(const core::Status& status) {
  std::cout << nft_wire::encode_status(status) << "\n";
  return status ? 0 : 1;
}

core::Status read_request(std::vector<EgressRule>& rules, std::vector<LinkAddress>& prefixes) {
  const std::string text{std::istreambuf_iterator<char>(std::cin), {}};
  return nft_wire::decode(text, rules, prefixes);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string verb = argc > 1 ? argv[1] : "";
  std::vector<EgressRule> rules;
  std::vector<LinkAddress> prefixes;
  if (verb == "egress" && argc == 2) {
    if (auto read = read_request(rules, prefixes); !read) return answer(read);
    return answer(install_egress_filter(3, rules, prefixes));
  }
  if (verb == "masquerade" && argc == 4) {
    if (auto read = read_request(rules, prefixes); !read) return answer(read);
    return answer(install_masquerade(argv[2], argv[3], prefixes));
  }
  if (verb == "delete" && argc == 3) return answer(delete_table(argv[2]));
  if (verb == "list" && argc == 3) {
    auto tables = tables_with_prefix(argv[2]);
    if (!tables) return answer(tables.error());
    for (const auto& table : *tables)
      std::cout << "TABLE " << table << "\n";
    return answer(core::ok_status());
  }
  std::cerr << "pulsebox-nft: run by pulsebox only (egress | masquerade TABLE LINK | delete TABLE "
               "| list PREFIX)\n";
  return 2;
}
