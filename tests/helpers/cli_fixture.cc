#include "helpers/cli_fixture.h"

#include <cstdlib>

#include "pulsebox/sandbox.h"

namespace pulsebox::testing {

void CliFixture::SetUp() {
  auto backend = make_native_backend(NativeBackendOptions{.state_dir = state_.path()});
  const Availability availability = backend->availability();
  PULSEBOX_SKIP_UNLESS(availability.available, availability.reason);
  const char* binary = std::getenv("PULSEBOX_BIN");
  binary_ = binary != nullptr ? binary : "";
  ASSERT_FALSE(binary_.empty()) << "PULSEBOX_BIN is set by meson";
}

std::vector<std::string> CliFixture::cli_env(bool served) const {
  std::vector<std::string> env = {"PULSEBOX_STATE_DIR=" + state_.path().string(), "NO_COLOR=1"};
  if (!served) env.push_back("PULSEBOX_SERVER=off");
  return env;
}

}  // namespace pulsebox::testing
