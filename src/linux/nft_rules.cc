#include "linux/nft_rules.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>

#include "linux/netlink_socket.h"

namespace pulsebox::linux_api {
namespace {

const std::string kStage = "nftables";

using MnlPtr = std::unique_ptr<mnl_socket, FreeWith<mnl_socket_close>>;
using TablePtr = std::unique_ptr<nftnl_table, FreeWith<nftnl_table_free>>;
using ChainPtr = std::unique_ptr<nftnl_chain, FreeWith<nftnl_chain_free>>;
using RulePtr = std::unique_ptr<nftnl_rule, FreeWith<nftnl_rule_free>>;

core::Error out_of_memory(const char* what) {
  return core::Error(core::ErrorKind::kResource, kStage, what);
}

core::Result<MnlPtr> own_socket() {
  MnlPtr socket(mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC));
  if (!socket) return core::Error::from_errno(kStage, "opening a NETLINK_NETFILTER socket");
  if (mnl_socket_bind(socket.get(), 0, MNL_SOCKET_AUTOPID) < 0)
    return core::Error::from_errno(kStage, "binding a NETLINK_NETFILTER socket");
  return socket;
}

core::Result<MnlPtr> adopt_socket(int fd) {
  PB_TRY(copy, adopt_netlink_socket(fd, NETLINK_NETFILTER, kStage));
  MnlPtr socket(mnl_socket_fdopen(copy.get()));
  if (!socket) return core::Error::from_errno(kStage, "using the passed NETLINK_NETFILTER socket");
  copy.release();  // mnl_socket_close closes it
  return socket;
}

// One rule's expressions, in order; the rule owns each expression added.
class RuleBuilder {
 public:
  RuleBuilder(const std::string& table, const char* chain) : rule_(nftnl_rule_alloc()) {
    if (!rule_) return;
    nftnl_rule_set_str(rule_.get(), NFTNL_RULE_TABLE, table.c_str());
    nftnl_rule_set_str(rule_.get(), NFTNL_RULE_CHAIN, chain);
  }

  RuleBuilder& meta(std::uint32_t key) {
    if (nftnl_expr* e = add("meta")) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
      nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
    }
    return *this;
  }
  RuleBuilder& ct_state() {
    if (nftnl_expr* e = add("ct")) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
      nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
    }
    return *this;
  }
  RuleBuilder& payload(std::uint32_t base, std::uint32_t offset, std::uint32_t length) {
    if (nftnl_expr* e = add("payload")) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
      nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
      nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, length);
      nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
    }
    return *this;
  }
  // reg1 = reg1 & mask (xor 0), over `length` bytes.
  RuleBuilder& mask(const void* mask_bytes, std::uint32_t length) {
    static constexpr std::uint8_t kZero[16] = {};
    if (nftnl_expr* e = add("bitwise")) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
      nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
      nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, length);
      nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask_bytes, length);
      nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, kZero, length);
    }
    return *this;
  }
  RuleBuilder& compare(std::uint32_t op, const void* data, std::uint32_t length) {
    if (nftnl_expr* e = add("cmp")) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
      nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
      nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, length);
    }
    return *this;
  }
  RuleBuilder& equals_u8(std::uint8_t value) { return compare(NFT_CMP_EQ, &value, 1); }
  RuleBuilder& interface_name(std::uint32_t key, std::uint32_t op, const std::string& name) {
    char padded[IFNAMSIZ] = {};
    std::memcpy(padded, name.data(), std::min(name.size(), sizeof(padded) - 1));
    return meta(key).compare(op, padded, sizeof(padded));
  }
  RuleBuilder& family(int address_family) {
    return meta(NFT_META_NFPROTO)
        .equals_u8(address_family == AF_INET ? NFPROTO_IPV4 : NFPROTO_IPV6);
  }
  RuleBuilder& l4proto(int protocol) {
    return meta(NFT_META_L4PROTO).equals_u8(static_cast<std::uint8_t>(protocol));
  }
  // The network header's source or destination address within `prefix`.
  RuleBuilder& address(const LinkAddress& prefix, bool source) {
    const bool v4 = prefix.family == AF_INET;
    const std::uint32_t length = v4 ? 4 : 16;
    const std::uint32_t offset = v4 ? (source ? 12 : 16) : (source ? 8 : 24);
    std::uint8_t bits[16] = {};
    std::uint8_t network[16] = {};
    for (std::uint32_t i = 0; i < length; ++i) {
      const int left = prefix.prefix - static_cast<int>(i * 8);
      bits[i] = left >= 8 ? 0xff : left <= 0 ? 0 : static_cast<std::uint8_t>(0xff << (8 - left));
      network[i] = prefix.bytes[i] & bits[i];
    }
    family(prefix.family).payload(NFT_PAYLOAD_NETWORK_HEADER, offset, length);
    if (prefix.prefix < static_cast<int>(length * 8)) mask(bits, length);
    return compare(NFT_CMP_EQ, network, length);
  }
  RuleBuilder& destination_port(std::uint16_t port) {
    const std::uint16_t network_order = htons(port);
    return payload(NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2).compare(NFT_CMP_EQ, &network_order, 2);
  }
  RuleBuilder& established_or_related() {
    const std::uint32_t states =
        NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED);
    const std::uint32_t zero = 0;
    return ct_state().mask(&states, 4).compare(NFT_CMP_NEQ, &zero, 4);
  }
  // ICMPv6 router and neighbour solicitations and advertisements (133-136)
  // to a destination within `scope`.
  RuleBuilder& neighbour_discovery(const LinkAddress& scope) {
    const std::uint8_t first = 133, last = 136;
    return address(scope, false)
        .l4proto(IPPROTO_ICMPV6)
        .payload(NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1)
        .compare(NFT_CMP_GTE, &first, 1)
        .compare(NFT_CMP_LTE, &last, 1);
  }
  RuleBuilder& verdict(int verdict_code) {
    if (nftnl_expr* e = add("immediate")) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
      nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, static_cast<std::uint32_t>(verdict_code));
    }
    return *this;
  }
  RuleBuilder& accept() { return verdict(NF_ACCEPT); }
  RuleBuilder& reject(std::uint32_t type, std::uint8_t code) {
    if (nftnl_expr* e = add("reject")) {
      nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, type);
      nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, code);
    }
    return *this;
  }
  RuleBuilder& masquerade() {
    add("masq");
    return *this;
  }

  bool ok() const { return rule_ && !failed_; }
  nftnl_rule* get() const { return rule_.get(); }

 private:
  nftnl_expr* add(const char* name) {
    if (!rule_) return nullptr;
    nftnl_expr* e = nftnl_expr_alloc(name);
    if (!e) {
      failed_ = true;
      return nullptr;
    }
    nftnl_rule_add_expr(rule_.get(), e);
    return e;
  }

  RulePtr rule_;
  bool failed_ = false;
};

// One nfnetlink transaction: messages between a batch begin and end, each
// asking for an acknowledgement.
class Batch {
 public:
  explicit Batch(std::size_t rules)
      : limit_((rules + 16) * 2048),
        buffer_(2 * limit_),
        seq_(static_cast<std::uint32_t>(time(nullptr))) {
    first_seq_ = seq_;
    batch_ = mnl_nlmsg_batch_start(buffer_.data(), limit_);
    if (batch_) {
      nftnl_batch_begin(static_cast<char*>(mnl_nlmsg_batch_current(batch_)), seq_++);
      next();
    }
  }
  ~Batch() {
    if (batch_) mnl_nlmsg_batch_stop(batch_);
  }
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  void table(std::uint16_t type, const std::string& name, std::uint16_t flags) {
    TablePtr table(nftnl_table_alloc());
    if (!table) return fail();
    nftnl_table_set_str(table.get(), NFTNL_TABLE_NAME, name.c_str());
    nftnl_table_nlmsg_build_payload(header(type, flags), table.get());
    next();
  }
  void base_chain(const std::string& table, const char* name, const char* type, std::uint32_t hook,
                  std::int32_t priority, std::uint32_t policy) {
    ChainPtr chain(nftnl_chain_alloc());
    if (!chain) return fail();
    nftnl_chain_set_str(chain.get(), NFTNL_CHAIN_TABLE, table.c_str());
    nftnl_chain_set_str(chain.get(), NFTNL_CHAIN_NAME, name);
    nftnl_chain_set_str(chain.get(), NFTNL_CHAIN_TYPE, type);
    nftnl_chain_set_u32(chain.get(), NFTNL_CHAIN_HOOKNUM, hook);
    nftnl_chain_set_s32(chain.get(), NFTNL_CHAIN_PRIO, priority);
    nftnl_chain_set_u32(chain.get(), NFTNL_CHAIN_POLICY, policy);
    nftnl_chain_nlmsg_build_payload(header(NFT_MSG_NEWCHAIN, NLM_F_CREATE), chain.get());
    next();
  }
  void rule(const RuleBuilder& rule) {
    if (!rule.ok()) return fail();
    nftnl_rule_nlmsg_build_payload(header(NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND),
                                   rule.get());
    next();
  }

  // Sends the transaction; the first error the kernel reports is the result.
  core::Status commit(mnl_socket* socket, const std::string& what) {
    if (!batch_ || failed_) return out_of_memory("building an nftables transaction");
    nftnl_batch_end(static_cast<char*>(mnl_nlmsg_batch_current(batch_)), seq_++);
    next();
    if (failed_) return out_of_memory("building an nftables transaction");
    if (mnl_socket_sendto(socket, mnl_nlmsg_batch_head(batch_), mnl_nlmsg_batch_size(batch_)) < 0)
      return core::Error::from_errno(kStage, what);
    return read_acknowledgements(socket, what);
  }

 private:
  nlmsghdr* header(std::uint16_t type, std::uint16_t flags) {
    ++messages_;
    return nftnl_nlmsg_build_hdr(static_cast<char*>(mnl_nlmsg_batch_current(batch_)), type,
                                 NFPROTO_INET, flags | NLM_F_ACK, seq_++);
  }
  void next() {
    if (!mnl_nlmsg_batch_next(batch_)) failed_ = true;  // past the limit: too many rules
  }
  void fail() { failed_ = true; }

  // nfnetlink handles a batch inside sendmsg(), so every answer is queued
  // when it returns; the poll bound only guards against a kernel that does
  // not answer.
  core::Status read_acknowledgements(mnl_socket* socket, const std::string& what) {
    std::vector<char> reply(MNL_SOCKET_BUFFER_SIZE);
    std::size_t answered = 0;
    while (answered < messages_) {
      pollfd ready{.fd = mnl_socket_get_fd(socket), .events = POLLIN, .revents = 0};
      const int polled = ::poll(&ready, 1, 5000);
      if (polled == 0)
        return core::Error(core::ErrorKind::kIo, kStage, what + ": the kernel did not answer");
      if (polled < 0) {
        if (errno == EINTR) continue;
        return core::Error::from_errno(kStage, what);
      }
      const ssize_t length = mnl_socket_recvfrom(socket, reply.data(), reply.size());
      if (length < 0) return core::Error::from_errno(kStage, what);
      int remaining = static_cast<int>(length);
      for (auto* message = reinterpret_cast<const nlmsghdr*>(reply.data());
           mnl_nlmsg_ok(message, remaining); message = mnl_nlmsg_next(message, &remaining)) {
        // Answers to an earlier transaction on a reused socket are not ours.
        if (message->nlmsg_type != NLMSG_ERROR || message->nlmsg_seq < first_seq_ ||
            message->nlmsg_seq >= seq_)
          continue;
        const auto* error = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(message));
        if (error->error != 0) return core::Error::from_errno(kStage, what, -error->error);
        ++answered;
      }
    }
    return core::ok_status();
  }

  std::size_t limit_;
  std::vector<char> buffer_;
  std::uint32_t seq_;
  std::uint32_t first_seq_ = 0;
  mnl_nlmsg_batch* batch_ = nullptr;
  std::size_t messages_ = 0;
  bool failed_ = false;
};

core::Status check_address(const LinkAddress& address, const char* what) {
  const std::size_t length = address_length(address.family);
  if (length == 0 || address.prefix < 0 || address.prefix > static_cast<int>(length * 8))
    return core::Error(core::ErrorKind::kInvalidInput, kStage,
                       std::string(what) + " is not an IPv4 or IPv6 prefix");
  return core::ok_status();
}

// The loopback, established/related and neighbour-discovery rules both
// chains of the egress filter start with. Outgoing neighbour discovery goes
// only to link-local unicast, link-scope multicast and the link's own
// prefixes: a solicitation or advertisement to any other address would be
// routed on by the host, a channel out. Incoming, any destination.
void add_common_rules(Batch& batch, const std::string& table, const char* chain, bool outgoing,
                      const std::vector<LinkAddress>& on_link_prefixes) {
  const std::uint32_t interface_key = outgoing ? NFT_META_OIFNAME : NFT_META_IIFNAME;
  batch.rule(RuleBuilder(table, chain).interface_name(interface_key, NFT_CMP_EQ, "lo").accept());
  batch.rule(RuleBuilder(table, chain).established_or_related().accept());
  std::vector<LinkAddress> scopes = {
      {.family = AF_INET6, .bytes = {0xfe, 0x80}, .prefix = 10},
      {.family = AF_INET6, .bytes = {0xff, 0x02}, .prefix = 16},
  };
  if (!outgoing) scopes = {{.family = AF_INET6, .bytes = {}, .prefix = 0}};
  for (const LinkAddress& prefix : on_link_prefixes)
    if (outgoing && prefix.family == AF_INET6) scopes.push_back(prefix);
  for (const LinkAddress& scope : scopes)
    batch.rule(RuleBuilder(table, chain).neighbour_discovery(scope).accept());
}

}  // namespace

core::Status install_egress_filter(int netfilter_socket, const std::vector<EgressRule>& rules,
                                   const std::vector<LinkAddress>& on_link_prefixes) {
  for (const LinkAddress& prefix : on_link_prefixes)
    PB_CHECK(check_address(prefix, "an on-link prefix"));
  for (const EgressRule& rule : rules) {
    PB_CHECK(check_address(rule.destination, "an allowed destination"));
    if (rule.protocol != 0 && rule.protocol != IPPROTO_TCP && rule.protocol != IPPROTO_UDP)
      return core::Error(core::ErrorKind::kInvalidInput, kStage,
                         "an allowed destination's protocol must be TCP, UDP or any (0)");
  }
  PB_TRY(socket, adopt_socket(netfilter_socket));
  const std::string table(kEgressTable);
  Batch batch(rules.size() * 2 + 16);
  // Add, delete, add: one transaction that replaces any earlier table.
  batch.table(NFT_MSG_NEWTABLE, table, NLM_F_CREATE);
  batch.table(NFT_MSG_DELTABLE, table, 0);
  batch.table(NFT_MSG_NEWTABLE, table, NLM_F_CREATE);
  batch.base_chain(table, "output", "filter", NF_INET_LOCAL_OUT, 0, NF_DROP);
  batch.base_chain(table, "input", "filter", NF_INET_LOCAL_IN, 0, NF_DROP);
  add_common_rules(batch, table, "output", true, on_link_prefixes);
  for (const EgressRule& rule : rules) {
    if (rule.protocol == 0 && !rule.port) {
      batch.rule(RuleBuilder(table, "output").address(rule.destination, false).accept());
      continue;
    }
    for (const int protocol : {IPPROTO_TCP, IPPROTO_UDP}) {
      if (rule.protocol != 0 && rule.protocol != protocol) continue;
      RuleBuilder builder(table, "output");
      builder.address(rule.destination, false).l4proto(protocol);
      if (rule.port) builder.destination_port(*rule.port);
      batch.rule(builder.accept());
    }
  }
  batch.rule(RuleBuilder(table, "output").l4proto(IPPROTO_TCP).reject(NFT_REJECT_TCP_RST, 0));
  batch.rule(RuleBuilder(table, "output")
                 .reject(NFT_REJECT_ICMPX_UNREACH, NFT_REJECT_ICMPX_ADMIN_PROHIBITED));
  add_common_rules(batch, table, "input", false, on_link_prefixes);
  return batch.commit(socket.get(), "installing the sandbox's egress filter");
}

core::Status install_masquerade(const std::string& table, const std::string& host_link,
                                const std::vector<LinkAddress>& sandbox_subnets) {
  if (table.empty() || host_link.empty() || host_link.size() >= IFNAMSIZ)
    return core::Error(core::ErrorKind::kInvalidInput, kStage,
                       "masquerading needs a table name and the host side's interface name");
  for (const LinkAddress& subnet : sandbox_subnets)
    PB_CHECK(check_address(subnet, "a sandbox subnet"));
  PB_TRY(socket, own_socket());
  Batch batch(sandbox_subnets.size() + 16);
  batch.table(NFT_MSG_NEWTABLE, table, NLM_F_CREATE | NLM_F_EXCL);
  batch.base_chain(table, "postrouting", "nat", NF_INET_POST_ROUTING, 100, NF_ACCEPT);
  batch.base_chain(table, "forward", "filter", NF_INET_FORWARD, 0, NF_ACCEPT);
  for (const LinkAddress& subnet : sandbox_subnets)
    batch.rule(RuleBuilder(table, "postrouting")
                   .address(subnet, true)
                   .interface_name(NFT_META_OIFNAME, NFT_CMP_NEQ, host_link)
                   .masquerade());
  batch.rule(RuleBuilder(table, "forward")
                 .interface_name(NFT_META_IIFNAME, NFT_CMP_EQ, host_link)
                 .accept());
  batch.rule(RuleBuilder(table, "forward")
                 .interface_name(NFT_META_OIFNAME, NFT_CMP_EQ, host_link)
                 .accept());
  return batch.commit(socket.get(), "installing masquerading in table " + table);
}

core::Status delete_table(const std::string& table) {
  PB_TRY(socket, own_socket());
  Batch batch(0);
  batch.table(NFT_MSG_DELTABLE, table, 0);
  core::Status deleted = batch.commit(socket.get(), "deleting table " + table);
  if (!deleted.ok() && deleted.error().error_number() == ENOENT) return core::ok_status();
  return deleted;
}

core::Result<std::vector<std::string>> tables_with_prefix(std::string_view prefix) {
  PB_TRY(socket, own_socket());
  std::vector<char> buffer(MNL_SOCKET_BUFFER_SIZE);
  const std::uint32_t seq = static_cast<std::uint32_t>(time(nullptr));
  nlmsghdr* request =
      nftnl_nlmsg_build_hdr(buffer.data(), NFT_MSG_GETTABLE, NFPROTO_INET, NLM_F_DUMP, seq);
  if (mnl_socket_sendto(socket.get(), request, request->nlmsg_len) < 0)
    return core::Error::from_errno(kStage, "listing tables");
  struct Found {
    std::string_view prefix;
    std::vector<std::string> names;
  } found{prefix, {}};
  auto on_table = [](const nlmsghdr* message, void* data) -> int {
    auto* out = static_cast<Found*>(data);
    TablePtr table(nftnl_table_alloc());
    if (!table || nftnl_table_nlmsg_parse(message, table.get()) < 0) return MNL_CB_ERROR;
    const char* name = nftnl_table_get_str(table.get(), NFTNL_TABLE_NAME);
    if (name != nullptr && std::string_view(name).starts_with(out->prefix))
      out->names.emplace_back(name);
    return MNL_CB_OK;
  };
  const unsigned int port = mnl_socket_get_portid(socket.get());
  for (;;) {
    pollfd ready{.fd = mnl_socket_get_fd(socket.get()), .events = POLLIN, .revents = 0};
    const int polled = ::poll(&ready, 1, 5000);
    if (polled == 0)
      return core::Error(core::ErrorKind::kIo, kStage, "listing tables: the kernel did not answer");
    if (polled < 0) {
      if (errno == EINTR) continue;
      return core::Error::from_errno(kStage, "listing tables");
    }
    const ssize_t length = mnl_socket_recvfrom(socket.get(), buffer.data(), buffer.size());
    if (length < 0) return core::Error::from_errno(kStage, "listing tables");
    const int rc =
        mnl_cb_run(buffer.data(), static_cast<std::size_t>(length), seq, port, on_table, &found);
    if (rc < 0) return core::Error::from_errno(kStage, "listing tables");
    if (rc == MNL_CB_STOP) break;
  }
  return std::move(found.names);
}

}  // namespace pulsebox::linux_api
