// Reading an overlayfs upper directory into a transaction draft.
#pragma once

#include <cstdint>
#include <filesystem>

#include "core/result.h"
#include "workspace/transactions.h"

namespace pulsebox::workspace {

core::Status import_upper_directory(TransactionStore& store, Draft& draft,
                                    const std::filesystem::path& upper,
                                    const std::filesystem::path& lower,
                                    std::uint64_t max_file_bytes, bool full_copy = false);

}  // namespace pulsebox::workspace
