#include "kernel_source.hpp"

#include <string>

namespace mmt::collect::cuda {

std::string_view gemm_kernel_source() {
    static const std::string joined = std::string(gemm_kernel_common_text()) + "\n#ifndef MMT_WGMMA\n" +
                                      std::string(gemm_kernel_text()) + "\n#else\n" +
                                      std::string(gemm_kernel_sm90_text()) + "\n#endif\n";
    return joined;
}

}  // namespace mmt::collect::cuda
