// A fixture for suites that drive the real CLI: a workspace, a state
// directory and a scratch directory of the test's own, and the binary meson
// builds ($PULSEBOX_BIN). A host where the native backend cannot run skips
// with the reason (PULSEBOX_SKIP_UNLESS).
#pragma once

#include <string>
#include <vector>

#include "helpers/test_support.h"

namespace pulsebox::testing {

class CliFixture : public ::testing::Test {
 protected:
  void SetUp() override;

  // The environment of a `pulsebox` the test runs: this fixture's state
  // directory, no colour, and in this process (PULSEBOX_SERVER=off) unless
  // `served`.
  std::vector<std::string> cli_env(bool served = false) const;

  TempDir workspace_;
  TempDir state_;
  TempDir scratch_;
  std::string binary_;
};

}  // namespace pulsebox::testing
