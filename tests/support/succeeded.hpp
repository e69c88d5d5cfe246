// For tests that check a failure's message: a call's Status as a bool, its
// message kept in *message (empty on success).
#pragma once

#include <string>

#include "status.hpp"

inline bool succeeded(const nnpccl::Status &status, std::string *message) {
    *message = status.message();
    return status.is_ok();
}
