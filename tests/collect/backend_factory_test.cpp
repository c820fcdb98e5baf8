// Picking a backend by --device.

#include "matmul_toolkit/collect/backend_factory.hpp"

#include <gtest/gtest.h>

#include "matmul_toolkit/build_config.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect {
namespace {

TEST(MakeBackend, CpuIsAlwaysThere) { EXPECT_EQ(make_backend("cpu")->name(), "cpu"); }

TEST(MakeBackend, AnUnknownDeviceNamesTheOption) {
    try {
        make_backend("tpu");
        FAIL() << "tpu accepted";
    } catch (const core::InputError& e) {
        EXPECT_EQ(e.subject(), "--device");
    }
}

TEST(MakeBackend, CudaWithoutAUsableDeviceIsBadInput) {
    if (cuda_device_available()) GTEST_SKIP() << "a CUDA device is present";
    EXPECT_THROW(make_backend("cuda"), core::InputError);
}

TEST(CudaDeviceAvailable, IsFalseWithoutTheCudaBackend) {
    if (MMT_WITH_CUDA) GTEST_SKIP() << "built with the CUDA backend";
    EXPECT_FALSE(cuda_device_available());
}

}  // namespace
}  // namespace mmt::collect
