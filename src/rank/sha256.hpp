#pragma once
// Private: SHA-256 (FIPS 180-4) of a byte string, for the model's digest in mmt_rank_info
// (the Python hook tags Inductor's compile cache with it).

#include <string>
#include <string_view>

namespace mmt::rank {

/// The digest as 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);

}  // namespace mmt::rank
