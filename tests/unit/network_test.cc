// The network policy's parsers and rules: IP addresses and ranges, the
// address kinds the DNS-rebinding guard decides on, --allow-domain
// patterns, and the proxy's request-head parser.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "network/address.h"
#include "network/domain_pattern.h"
#include "network/proxy_request.h"
#include "network/resolver.h"

namespace pulsebox::network {
namespace {

IpAddress address(std::string_view text) {
  const auto parsed = parse_ip_address(text);
  EXPECT_TRUE(parsed.has_value()) << text;
  return parsed.value_or(IpAddress{});
}

TEST(NetworkAddressTest, ParsesAndPrintsAddresses) {
  const std::vector<std::pair<std::string_view, std::string_view>> good = {
      {"192.0.2.1", "192.0.2.1"},     {"0.0.0.0", "0.0.0.0"},
      {"2001:db8::1", "2001:db8::1"}, {"[2001:db8::1]", "2001:db8::1"},
      {"FD00::A", "fd00::a"},         {"::ffff:1.2.3.4", "::ffff:1.2.3.4"},
  };
  for (const auto& [text, printed] : good) {
    EXPECT_EQ(to_string(address(text)), printed) << text;
  }
  EXPECT_EQ(address("192.0.2.1").family, AF_INET);
  EXPECT_EQ(address("[::1]").family, AF_INET6);
  for (std::string_view bad : {"", "1.2.3", "127.1", "0x7f000001", "2130706433", "01.2.3.4",
                               "1.2.3.4 ", " 1.2.3.4", "256.1.1.1", "[1.2.3.4]", "fe80::1%lo",
                               "[::1", "::1]", "1.2.3.4/32", "example.test", "::g"}) {
    EXPECT_FALSE(parse_ip_address(bad).has_value()) << bad;
  }
  EXPECT_FALSE(parse_ip_address(std::string_view("1.2.3.4\0.5", 10)).has_value());
}

TEST(NetworkAddressTest, ParsesRangesAndRefusesHostBits) {
  const auto range = parse_ip_range("10.0.0.0/8");
  ASSERT_TRUE(range);
  EXPECT_EQ(range->prefix, 8);
  EXPECT_EQ(to_string(*range), "10.0.0.0/8");
  EXPECT_EQ(parse_ip_range("192.0.2.7")->prefix, 32);
  EXPECT_EQ(parse_ip_range("2001:db8::7")->prefix, 128);
  EXPECT_EQ(parse_ip_range("[fd00::]/8")->prefix, 8);
  EXPECT_EQ(parse_ip_range("0.0.0.0/0")->prefix, 0);
  for (std::string_view bad :
       {"10.0.0.1/8", "10.0.0.0/33", "fd00::/129", "10.0.0.0/", "10.0.0.0/08", "10.0.0.0/-1",
        "10.0.0.0/8/8", "/8", "fd00::1/8", "10.0.0.0/ 8"}) {
    EXPECT_FALSE(parse_ip_range(bad).has_value()) << bad;
  }
}

TEST(NetworkAddressTest, RangesContainTheirAddresses) {
  struct Case {
    std::string_view range;
    std::string_view address;
    bool inside;
  };
  const std::vector<Case> cases = {
      {"10.0.0.0/8", "10.255.1.2", true},
      {"10.0.0.0/8", "11.0.0.0", false},
      {"172.16.0.0/12", "172.31.255.255", true},
      {"172.16.0.0/12", "172.32.0.0", false},
      {"169.254.7.1", "169.254.7.1", true},
      {"169.254.7.1", "169.254.7.2", false},
      {"169.254.7.1", "::ffff:169.254.7.1", true},  // the mapped form reaches the same host
      {"169.254.7.1", "64:ff9b::169.254.7.1", false},
      {"fd00::/8", "fd12::1", true},
      {"fd00::/8", "fe00::1", false},
      {"0.0.0.0/0", "::1", false},
      {"::/0", "1.2.3.4", false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(contains(*parse_ip_range(c.range), address(c.address)), c.inside)
        << c.range << " " << c.address;
  }
}

TEST(NetworkAddressTest, ClassifiesAddresses) {
  const std::vector<std::pair<std::string_view, AddressKind>> cases = {
      {"93.184.216.34", AddressKind::Public},
      {"8.8.8.8", AddressKind::Public},
      {"2606:4700::1111", AddressKind::Public},
      {"127.0.0.1", AddressKind::Loopback},
      {"127.255.0.9", AddressKind::Loopback},
      {"::1", AddressKind::Loopback},
      {"10.1.2.3", AddressKind::Private},
      {"172.16.0.1", AddressKind::Private},
      {"172.31.9.9", AddressKind::Private},
      {"172.32.0.1", AddressKind::Public},
      {"192.168.1.1", AddressKind::Private},
      {"100.64.0.1", AddressKind::Private},
      {"100.127.255.255", AddressKind::Private},
      {"fd00::1", AddressKind::Private},
      {"fc00::1", AddressKind::Private},
      {"169.254.1.1", AddressKind::LinkLocal},
      {"fe80::1", AddressKind::LinkLocal},
      {"169.254.169.254", AddressKind::Metadata},
      {"169.254.170.2", AddressKind::Metadata},
      {"100.100.100.200", AddressKind::Metadata},
      {"fd00:ec2::254", AddressKind::Metadata},
      {"224.0.0.1", AddressKind::Multicast},
      {"239.255.255.250", AddressKind::Multicast},
      {"ff02::1", AddressKind::Multicast},
      {"0.0.0.0", AddressKind::Unspecified},
      {"::", AddressKind::Unspecified},
      {"0.1.2.3", AddressKind::Reserved},
      {"240.0.0.1", AddressKind::Reserved},
      {"255.255.255.255", AddressKind::Reserved},
      {"192.0.0.8", AddressKind::Reserved},
      {"198.18.0.1", AddressKind::Reserved},
      {"198.19.255.255", AddressKind::Reserved},
      {"192.0.2.1", AddressKind::Reserved},
      {"2001:db8::1", AddressKind::Reserved},
      {"2001::1", AddressKind::Reserved},  // Teredo
      {"100::1", AddressKind::Reserved},
      // IPv6 forms that carry an IPv4 address are that address.
      {"::ffff:169.254.169.254", AddressKind::Metadata},
      {"::ffff:127.0.0.1", AddressKind::Loopback},
      {"::ffff:10.0.0.1", AddressKind::Private},
      {"::ffff:8.8.8.8", AddressKind::Public},
      {"::ffff:0:127.0.0.1", AddressKind::Loopback},
      {"::127.0.0.1", AddressKind::Loopback},
      {"::169.254.169.254", AddressKind::Metadata},
      {"64:ff9b::169.254.169.254", AddressKind::Metadata},
      {"64:ff9b::10.0.0.1", AddressKind::Private},
      {"64:ff9b::8.8.8.8", AddressKind::Public},
      {"2002:a9fe:a9fe::1", AddressKind::Metadata},  // 6to4 of 169.254.169.254
      {"2002:7f00:1::", AddressKind::Loopback},
  };
  for (const auto& [text, kind] : cases) {
    EXPECT_EQ(to_string(classify(address(text))), to_string(kind)) << text;
  }
}

TEST(NetworkAddressTest, GuardRefusesInnerAddressesUnlessListed) {
  const std::vector<IpAddress> addresses = {address("8.8.8.8"), address("169.254.7.1"),
                                            address("8.8.8.8"), address("::ffff:10.0.0.1")};
  const auto unlisted = guard_addresses(addresses, {});
  ASSERT_EQ(unlisted.allowed.size(), 1u);
  ASSERT_EQ(unlisted.refused.size(), 2u);
  EXPECT_EQ(unlisted.refused[0].second, AddressKind::LinkLocal);
  EXPECT_EQ(unlisted.refused[1].second, AddressKind::Private);
  EXPECT_FALSE(destination_allowed(unlisted));

  const auto listed =
      guard_addresses(addresses, {*parse_ip_range("169.254.7.1"), *parse_ip_range("10.0.0.0/8")});
  EXPECT_EQ(listed.allowed.size(), 3u);
  EXPECT_TRUE(listed.refused.empty());
  EXPECT_TRUE(destination_allowed(listed));
  EXPECT_FALSE(destination_allowed(guard_addresses({}, {})));
}

TEST(NetworkAddressTest, ResolveGuardsLiteralsAndRefusesWhatIsNotAName) {
  const auto literal = resolve_guarded("[::ffff:169.254.169.254]", {});
  ASSERT_TRUE(literal.ok());
  ASSERT_EQ(literal->refused.size(), 1u);
  EXPECT_EQ(literal->refused[0].second, AddressKind::Metadata);
  // Names are resolved in the proxy suite, inside its own network namespace.
  const auto bad = resolve_guarded("not a name", {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("not a name"), std::string::npos);
}

TEST(NetworkDomainPatternTest, ParsesAndNormalisesPatterns) {
  const std::vector<std::pair<std::string_view, std::string_view>> good = {
      {"api.example.test", "api.example.test"},
      {"API.Example.TEST.", "api.example.test"},
      {"*.example.test", "*.example.test"},
      {"*.Example.Test.", "*.example.test"},
      {"localhost", "localhost"},
      {"a-b.c1.test", "a-b.c1.test"},
      {"xn--bcher-kva.test", "xn--bcher-kva.test"},
  };
  for (const auto& [text, normal] : good) {
    const auto pattern = DomainPattern::parse(text);
    ASSERT_TRUE(pattern.ok()) << text << ": " << pattern.error().to_string();
    EXPECT_EQ(pattern->text(), normal);
  }
  const std::string long_label(64, 'a');
  std::string long_name;
  while (long_name.size() < 254)
    long_name += "abcdefghi.";
  long_name += "test";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "every name"},
      {"*", "every name"},
      {"*.", "every name"},
      {".", "empty"},
      {"api..example.test", "empty label"},
      {".example.test", "empty label"},
      {"a.*.example.test", "'*'"},
      {"*example.test", "'*'"},
      {"**.example.test", "'*'"},
      {"api.example.test*", "'*'"},
      {"192.0.2.1", "IP address"},
      {"[::1]", "IP address"},
      {"::1", "IP address"},
      {"127.1", "all digits"},
      {"example.123", "all digits"},
      {"exa_mple.test", "character"},
      {"exa mple.test", "character"},
      {"ex\xc3\xa4mple.test", "character"},
      {"-api.example.test", "'-'"},
      {"api-.example.test", "'-'"},
      {long_label + ".test", "63"},
      {long_name, "253"},
      {"example.test:443", "character"},
  };
  for (const auto& [text, why] : bad) {
    const auto pattern = DomainPattern::parse(text);
    ASSERT_FALSE(pattern.ok()) << text;
    EXPECT_EQ(pattern.error().kind(), core::ErrorKind::kInvalidInput);
    const std::string message = pattern.error().message();
    EXPECT_NE(message.find("--allow-domain"), std::string::npos) << message;
    EXPECT_NE(message.find(why), std::string::npos) << text << ": " << message;
  }
}

TEST(NetworkDomainPatternTest, MatchesNames) {
  const auto exact = DomainPattern::parse("api.example.test").value();
  const auto wild = DomainPattern::parse("*.example.test").value();
  struct Case {
    std::string_view host;
    bool exact;
    bool wild;
  };
  const std::vector<Case> cases = {
      {"api.example.test", true, true},
      {"API.EXAMPLE.TEST.", true, true},
      {"example.test", false, false},  // a wildcard does not hold its base name
      {"a.b.example.test", false, true},
      {"evil-example.test", false, false},
      {"evilexample.test", false, false},
      {"api.example.test.evil.test", false, false},
      {"api.example.test..", false, false},
      {"api%2eexample.test", false, false},
      {"", false, false},
      {"*.example.test", false, false},
      {"169.254.0.1", false, false},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(exact.matches(c.host), c.exact) << c.host;
    EXPECT_EQ(wild.matches(c.host), c.wild) << c.host;
  }
}

TEST(NetworkProxyRequestTest, ParsesConnectAndAbsoluteForm) {
  auto connect = parse_proxy_request(
      "CONNECT api.example.test:443 HTTP/1.1\r\nHost: x\r\nUser-Agent:  a b \r\n\r\n");
  ASSERT_TRUE(connect);
  EXPECT_EQ(connect->method, "CONNECT");
  EXPECT_EQ(connect->host, "api.example.test");
  EXPECT_EQ(connect->port, 443);
  EXPECT_EQ(connect->target, "");
  ASSERT_EQ(connect->headers.size(), 2u);
  EXPECT_EQ(connect->headers[1].second, "a b");

  auto v6 = parse_proxy_request("CONNECT [fd00::2]:8443 HTTP/1.1\r\n\r\n");
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->host, "fd00::2");
  EXPECT_EQ(v6->port, 8443);

  auto get = parse_proxy_request("GET HTTP://Api.Example.Test/a/b?c=d#frag HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(get);
  EXPECT_EQ(get->host, "Api.Example.Test");
  EXPECT_EQ(get->port, 80);
  EXPECT_EQ(get->target, "/a/b?c=d");
  EXPECT_EQ(get->version, "HTTP/1.0");
  EXPECT_EQ(parse_proxy_request("GET http://h.test:8080 HTTP/1.1\r\n\r\n")->target, "/");
  EXPECT_EQ(parse_proxy_request("GET http://h.test?q HTTP/1.1\r\n\r\n")->target, "/?q");
}

TEST(NetworkProxyRequestTest, OriginFormHeadTakesHostFromTheUrlAndDropsProxyHeaders) {
  const auto request = parse_proxy_request(
      "POST http://[fd00::2]:8080/up?x=1 HTTP/1.1\r\nHost: elsewhere.test\r\n"
      "Proxy-Authorization: Basic eA==\r\nPROXY-CONNECTION: keep-alive\r\n"
      "Connection: keep-alive, Upgrade\r\nKeep-Alive: 5\r\nContent-Length: 2\r\n\r\n");
  ASSERT_TRUE(request);
  EXPECT_EQ(origin_form_head(*request),
            "POST /up?x=1 HTTP/1.1\r\nHost: [fd00::2]:8080\r\nContent-Length: 2\r\n"
            "Connection: close\r\n\r\n");
  EXPECT_EQ(origin_form_head(*parse_proxy_request("GET http://a.test/ HTTP/1.0\r\n\r\n")),
            "GET / HTTP/1.0\r\nHost: a.test\r\nConnection: close\r\n\r\n");
}

TEST(NetworkProxyRequestTest, RefusesAnythingElse) {
  for (std::string_view bad : {
           "",
           "\r\n\r\n",
           "CONNECT api.example.test:443 HTTP/1.1\r\n",  // no blank line
           "CONNECT api.example.test HTTP/1.1\r\n\r\n",  // no port
           "CONNECT api.example.test:0 HTTP/1.1\r\n\r\n",
           "CONNECT api.example.test:65536 HTTP/1.1\r\n\r\n",
           "CONNECT api.example.test:+443 HTTP/1.1\r\n\r\n",
           "CONNECT [fd00::2:443 HTTP/1.1\r\n\r\n",
           "CONNECT [example.test]:443 HTTP/1.1\r\n\r\n",
           "CONNECT a/b:443 HTTP/1.1\r\n\r\n",
           "GET /origin-form HTTP/1.1\r\n\r\n",
           "GET https://api.example.test/ HTTP/1.1\r\n\r\n",  // no TLS origination
           "GET http://user:pw@api.example.test/ HTTP/1.1\r\n\r\n",
           "GET http:///x HTTP/1.1\r\n\r\n",
           "get http://a.test/ HTTP/1.1\r\n\r\n",
           "GET http://a.test/ HTTP/2\r\n\r\n",
           "GET  http://a.test/ HTTP/1.1\r\n\r\n",
           "GET http://a.test/ HTTP/1.1 \r\n\r\n",
           "GET http://a.test/\x01 HTTP/1.1\r\n\r\n",
           "GET http://a.test/ HTTP/1.1\nHost: a\r\n\r\n",       // bare LF
           "GET http://a.test/ HTTP/1.1\r\nHost: a\rb\r\n\r\n",  // bare CR
           "GET http://a.test/ HTTP/1.1\r\n folded\r\n\r\n",
           "GET http://a.test/ HTTP/1.1\r\nNo colon\r\n\r\n",
           "GET http://a.test/ HTTP/1.1\r\n: empty\r\n\r\n",
           "GET http://a.test/ HTTP/1.1\r\nBad Name: x\r\n\r\n",
           "GET http://a.test/ HTTP/1.1\r\nX: a\x01b\r\n\r\n",
       }) {
    EXPECT_FALSE(parse_proxy_request(bad).has_value()) << bad;
  }
  std::string many = "GET http://a.test/ HTTP/1.1\r\n";
  for (int i = 0; i < 101; ++i)
    many += "X: y\r\n";
  EXPECT_FALSE(parse_proxy_request(many + "\r\n").has_value());
  std::string huge = "GET http://a.test/ HTTP/1.1\r\nX: " + std::string(kMaxRequestHead, 'a');
  EXPECT_FALSE(parse_proxy_request(huge + "\r\n\r\n").has_value());
}

}  // namespace
}  // namespace pulsebox::network
