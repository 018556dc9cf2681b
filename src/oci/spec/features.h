// `pulsebox oci features`: runtime-spec's features document (features.md),
// built from the config reader's own tables so that what it announces is
// exactly what the reader accepts:
//
//   std::cout << oci::spec::features_document().dump(2) << "\n";
#pragma once

#include <nlohmann/json.hpp>

namespace pulsebox::oci::spec {

nlohmann::json features_document();

}  // namespace pulsebox::oci::spec
