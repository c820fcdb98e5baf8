// The driver is loaded at run time: without one the backend says why and the binary
// keeps working on CPU.

#include <gtest/gtest.h>

#include "cuda/cuda_check.hpp"
#include "cuda/driver_api.hpp"
#include "matmul_toolkit/collect/backend_factory.hpp"
#include "matmul_toolkit/collect/cuda_backend.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect::cuda {
namespace {

TEST(CudaDriverApi, LoadsOrExplainsWhyNot) {
    const DriverApi* api = try_load_driver();
    if (api != nullptr) {
        EXPECT_TRUE(driver_unavailable_reason().empty());
        EXPECT_NE(api->cuLaunchKernel, nullptr);
        EXPECT_NE(api->cuMemAlloc, nullptr);
    } else {
        EXPECT_FALSE(driver_unavailable_reason().empty());
        EXPECT_THROW(driver(), core::Error);
    }
}

TEST(CudaDriverApi, WithoutDeviceTheFactorySaysSo) {
    if (cuda_backend_device_available()) GTEST_SKIP() << "a CUDA device is present";
    EXPECT_FALSE(cuda_device_available());
    try {
        make_backend("cuda");
        FAIL() << "make_backend(\"cuda\") succeeded without a device";
    } catch (const core::InputError& e) {
        EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos);
    }
    EXPECT_EQ(make_backend("cpu")->name(), "cpu");
}

TEST(CudaDriverApi, ErrorTextNamesTheCallAndError) {
    try {
        throw_cuda_error(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc(&p, n)", "file.cpp", 7);
    } catch (const core::Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("cuMemAlloc(&p, n)"), std::string::npos);
        EXPECT_NE(what.find("file.cpp:7"), std::string::npos);
        // Named by the driver when there is one, else by number.
        EXPECT_TRUE(what.find("CUDA_ERROR_OUT_OF_MEMORY") != std::string::npos || what.find("CUresult 2") != std::string::npos);
    }
}

}  // namespace
}  // namespace mmt::collect::cuda
