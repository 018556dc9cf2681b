// The pre-libc client (cli/fast_client.h) speaks server/protocol.h's bytes
// exactly: its own encoder and identity against the library's.
#include "cli/fast_client.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/protocol.h"

namespace pulsebox {
namespace {

TEST(FastClientTest, ItsRequestIsTheLibrarysEncodingByteForByte) {
  std::vector<std::string> args = {"pulsebox", "run",      "-w", "dir with space", "--", "sh",
                                   "-c",       "echo 'x'", "",   "ünicode"};
  std::vector<std::string> env = {"PATH=/usr/bin:/bin", "EMPTY=", "X=a=b"};
  std::vector<char*> argv, envp;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);

  server::RunRequest request;
  request.args.assign(args.begin() + 2, args.end());
  request.environment = env;
  request.cwd = "/some/where";
  request.umask = 027;
  request.client_binary = "2049:17:1000:3.25";
  const std::string expected = server::encode(request);

  std::string out(expected.size() + 16, '\0');
  const std::size_t size = pulsebox_fast_encode_request(
      out.data(), out.size(), argv.data(), 2, static_cast<int>(args.size()), envp.data(),
      request.cwd.c_str(), request.umask, request.client_binary.c_str());
  ASSERT_EQ(size, expected.size());
  EXPECT_EQ(out.substr(0, size), expected);
  // Too small a buffer is "does not fit", never a cut request.
  EXPECT_EQ(pulsebox_fast_encode_request(
                out.data(), expected.size() - 1, argv.data(), 2, static_cast<int>(args.size()),
                envp.data(), request.cwd.c_str(), request.umask, request.client_binary.c_str()),
            0u);
  // Nothing after argc is read.
  EXPECT_EQ(pulsebox_fast_encode_request(out.data(), out.size(), argv.data(), 2, 2, envp.data(), "",
                                         0, ""),
            server::encode(server::RunRequest{.environment = env, .umask = 0}).size());
}

TEST(FastClientTest, ItsBinaryIdentityIsTheLibrarys) {
  char identity[128];
  ASSERT_TRUE(pulsebox_fast_binary_identity(identity, sizeof identity));
  EXPECT_EQ(std::string(identity), server::binary_identity());
  EXPECT_FALSE(pulsebox_fast_binary_identity(identity, 4));
}

}  // namespace
}  // namespace pulsebox
