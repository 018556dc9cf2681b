// Linked into a test binary: every test in it runs in the binary's own
// network namespace (helpers/private_network.h). A binary that cannot enter
// one fails every test, with the reason, rather than touching the host's.
#include <gtest/gtest.h>

#include "helpers/private_network.h"

namespace {

class PrivateNetwork : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string error = pulsebox::testing::enter_private_network();
    ASSERT_TRUE(error.empty()) << "entering the tests' own network namespace: " << error;
  }
};

const auto* const registered = ::testing::AddGlobalTestEnvironment(new PrivateNetwork);

}  // namespace
