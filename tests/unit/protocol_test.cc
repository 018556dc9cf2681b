// The local server's protocol (server/protocol.h): what is encoded decodes
// to the same thing, anything else is refused (never misread), and
// messages carry their descriptors.
#include "server/protocol.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>

#include "helpers/test_support.h"

namespace pulsebox::server {
namespace {

RunRequest sample_request() {
  RunRequest request;
  request.args = {"-w", "project", "--secret", "TOKEN", "--", "sh", "-c", "echo 'a b'", ""};
  request.environment = {"PATH=/usr/bin:/bin", "TOKEN=x=y", "EMPTY="};
  request.cwd = "/home/me";
  request.umask = 027;
  request.client_binary = "2049:1234:99:1.5";
  return request;
}

TEST(ProtocolTest, RequestsAndRepliesRoundTrip) {
  const RunRequest request = sample_request();
  auto decoded = decode_request(encode(request));
  ASSERT_TRUE(decoded.ok()) << decoded.error().to_string();
  EXPECT_EQ(decoded->args, request.args);
  EXPECT_EQ(decoded->environment, request.environment);
  EXPECT_EQ(decoded->cwd, request.cwd);
  EXPECT_EQ(decoded->umask, request.umask);
  EXPECT_EQ(decoded->client_binary, request.client_binary);

  for (const RunReply& reply :
       {RunReply{ReplyKind::Done, 137, ""}, RunReply{ReplyKind::Done, -1, ""},
        RunReply{ReplyKind::Fallback, 0, "another binary"}}) {
    auto back = decode_reply(encode(reply));
    ASSERT_TRUE(back.ok()) << back.error().to_string();
    EXPECT_EQ(back->kind, reply.kind);
    EXPECT_EQ(back->exit_code, reply.exit_code);
    EXPECT_EQ(back->reason, reply.reason);
  }
}

TEST(ProtocolTest, EveryTruncationAndAnyOtherVersionIsRefused) {
  const std::string bytes = encode(sample_request());
  for (std::size_t size = 0; size < bytes.size(); ++size)
    EXPECT_FALSE(decode_request(bytes.substr(0, size)).ok()) << size;
  EXPECT_FALSE(decode_request(bytes + "x").ok());  // trailing bytes
  std::string other_version = bytes;
  other_version[4] = 2;
  auto refused = decode_request(other_version);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().to_string().find("protocol version 2, expected 1"), std::string::npos)
      << refused.error().to_string();
  // A reply is not a request, nor the other way round.
  EXPECT_FALSE(decode_request(encode(RunReply{})).ok());
  EXPECT_FALSE(decode_reply(bytes).ok());
  // A list count far beyond the bytes is refused before anything is made.
  std::string huge = bytes;
  const std::size_t count_at = 8 + 4 + sample_request().client_binary.size();
  huge[count_at + 3] = '\x7f';
  EXPECT_FALSE(decode_request(huge).ok());
  // An unknown reply kind.
  std::string reply = encode(RunReply{});
  reply[8] = 9;
  EXPECT_FALSE(decode_reply(reply).ok());
}

TEST(ProtocolTest, RandomBytesNeverDecodeToSomethingElse) {
  std::mt19937 random(42);
  const std::string good = encode(sample_request());
  for (int round = 0; round < 20000; ++round) {
    std::string bytes = good;
    // A few random byte changes: whatever still decodes must encode back
    // to exactly these bytes (nothing is skipped or guessed).
    for (int flips = 1 + static_cast<int>(random() % 4); flips > 0; --flips)
      bytes[random() % bytes.size()] = static_cast<char>(random());
    if (auto decoded = decode_request(bytes); decoded.ok()) {
      EXPECT_EQ(encode(*decoded), bytes);
    }
  }
}

TEST(ProtocolTest, MessagesCarryTheirDescriptorsAndOversizedOnesAreRefused) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair), 0);
  const core::UniqueFd a(pair[0]), b(pair[1]);
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const core::UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  ASSERT_EQ(send_message(a.get(), "hello", {write_end.get(), STDERR_FILENO}), 0);
  auto received = receive_message(b.get(), 64, 3);
  ASSERT_TRUE(received.has_value());
  EXPECT_EQ(received->bytes, "hello");
  ASSERT_EQ(received->fds.size(), 2u);
  // The descriptor is the pipe's write end: what is written arrives.
  ASSERT_EQ(::write(received->fds[0].get(), "x", 1), 1);
  char c = 0;
  ASSERT_EQ(::read(read_end.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
  EXPECT_NE(::fcntl(received->fds[0].get(), F_GETFD) & FD_CLOEXEC, 0);

  ASSERT_EQ(send_message(a.get(), std::string(100, 'y')), 0);
  errno = 0;
  EXPECT_FALSE(receive_message(b.get(), 64, 0).has_value());
  EXPECT_EQ(errno, EMSGSIZE);

  // Three descriptors where one was expected: refused, and none of them leaks.
  ASSERT_EQ(send_message(a.get(), "z", {write_end.get(), write_end.get(), write_end.get()}), 0);
  errno = 0;
  EXPECT_FALSE(receive_message(b.get(), 64, 1).has_value());
  EXPECT_EQ(errno, EMSGSIZE);

  EXPECT_EQ(peer_uid(a.get()), ::geteuid());
  ::shutdown(a.get(), SHUT_WR);
  errno = 0;
  EXPECT_FALSE(receive_message(b.get(), 64, 0).has_value());
  EXPECT_EQ(errno, ECONNRESET);
}

}  // namespace
}  // namespace pulsebox::server
