// Shared between spec.cc (top level, process, mounts) and spec_linux.cc.
#pragma once

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "oci/spec/field_reader.h"
#include "oci/spec/spec.h"

namespace pulsebox::oci::spec {

core::Result<Linux> read_linux(const ReadContext& ctx, const nlohmann::json& value);

// The checks that need more than one field, once everything is read.
core::Status check_cross_fields(const ReadContext& ctx, const Spec& spec);

}  // namespace pulsebox::oci::spec
