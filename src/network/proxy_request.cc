#include "network/proxy_request.h"

#include <algorithm>
#include <charconv>

#include "network/address.h"

namespace pulsebox::network {

namespace {

bool is_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_visible(char c) {
  return c > 0x20 && c < 0x7f;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);
         });
}

std::optional<int> parse_port(std::string_view digits) {
  if (digits.empty() || digits.size() > 5 || digits[0] == '0') return std::nullopt;
  int port = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (error != std::errc() || end != digits.data() + digits.size() || port < 1 || port > 65535)
    return std::nullopt;
  return port;
}

// "host", "host:port", "[v6]" or "[v6]:port" into host (no brackets) and
// port. The host is restricted to name characters or an IPv6 literal.
bool parse_authority(std::string_view authority, int default_port, ProxyRequest& request) {
  std::string_view host;
  std::string_view rest;
  if (authority.starts_with('[')) {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return false;
    host = authority.substr(1, close - 1);
    rest = authority.substr(close + 1);
    if (!parse_ip_address(host) || host.find(':') == std::string_view::npos) return false;
  } else {
    const auto colon = authority.find(':');
    host = authority.substr(0, colon);
    rest = colon == std::string_view::npos ? std::string_view() : authority.substr(colon);
    if (host.empty() || host.size() > 253) return false;
    for (const char c : host) {
      const bool name_char = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                             (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
      if (!name_char) return false;
    }
  }
  if (rest.empty()) {
    if (default_port == 0) return false;
    request.port = default_port;
  } else {
    if (rest[0] != ':') return false;
    const auto port = parse_port(rest.substr(1));
    if (!port) return false;
    request.port = *port;
  }
  request.host = std::string(host);
  return true;
}

bool parse_request_line(std::string_view line, ProxyRequest& request) {
  const auto first = line.find(' ');
  if (first == std::string_view::npos) return false;
  const auto second = line.find(' ', first + 1);
  if (second == std::string_view::npos) return false;
  const std::string_view method = line.substr(0, first);
  const std::string_view target = line.substr(first + 1, second - first - 1);
  const std::string_view version = line.substr(second + 1);
  if (method.empty() || method.size() > 16 ||
      !std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; }))
    return false;
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return false;
  if (target.empty() || !std::all_of(target.begin(), target.end(), is_visible)) return false;
  request.method = std::string(method);
  request.version = std::string(version);
  if (method == "CONNECT") return parse_authority(target, 0, request);
  constexpr std::string_view kScheme = "http://";
  if (target.size() < kScheme.size() || !iequals(target.substr(0, kScheme.size()), kScheme))
    return false;
  const std::string_view after = target.substr(kScheme.size());
  const auto path_start = after.find_first_of("/?");
  const std::string_view authority = after.substr(0, path_start);
  if (authority.find('@') != std::string_view::npos) return false;  // no userinfo
  if (!parse_authority(authority, 80, request)) return false;
  std::string_view path =
      path_start == std::string_view::npos ? std::string_view() : after.substr(path_start);
  const auto fragment = path.find('#');
  if (fragment != std::string_view::npos) path = path.substr(0, fragment);
  request.target = path.empty() || path[0] == '?' ? "/" + std::string(path) : std::string(path);
  return true;
}

bool parse_header_line(std::string_view line, ProxyRequest& request) {
  const auto colon = line.find(':');
  if (colon == 0 || colon == std::string_view::npos) return false;
  const std::string_view name = line.substr(0, colon);
  if (!std::all_of(name.begin(), name.end(), is_tchar)) return false;
  std::string_view value = line.substr(colon + 1);
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t') || byte == 0x7f) return false;
  }
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
    value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
    value.remove_suffix(1);
  request.headers.emplace_back(std::string(name), std::string(value));
  return request.headers.size() <= 100;
}

std::string host_for_header(const ProxyRequest& request) {
  const bool v6 = request.host.find(':') != std::string::npos;
  std::string host = v6 ? "[" + request.host + "]" : request.host;
  if (request.port != 80) host += ":" + std::to_string(request.port);
  return host;
}

}  // namespace

std::optional<ProxyRequest> parse_proxy_request(std::string_view head) {
  if (head.size() > kMaxRequestHead || !head.ends_with("\r\n\r\n")) return std::nullopt;
  head.remove_suffix(2);  // the blank line; every line now ends in CRLF
  ProxyRequest request;
  bool first = true;
  while (!head.empty()) {
    const auto end = head.find("\r\n");
    const std::string_view line = head.substr(0, end);
    // A lone CR or LF inside a line is how request smuggling starts.
    if (line.find_first_of("\r\n") != std::string_view::npos) return std::nullopt;
    if (first ? !parse_request_line(line, request) : !parse_header_line(line, request))
      return std::nullopt;
    first = false;
    head.remove_prefix(end + 2);
  }
  if (first) return std::nullopt;
  return request;
}

std::string origin_form_head(const ProxyRequest& request) {
  std::string head = request.method + " " + request.target + " " + request.version + "\r\n";
  head += "Host: " + host_for_header(request) + "\r\n";
  for (const auto& [name, value] : request.headers) {
    if (iequals(name, "host") || iequals(name, "connection") || iequals(name, "keep-alive") ||
        (name.size() >= 6 && iequals(std::string_view(name).substr(0, 6), "proxy-"))) {
      continue;
    }
    head += name + ": " + value + "\r\n";
  }
  head += "Connection: close\r\n\r\n";
  return head;
}

}  // namespace pulsebox::network
