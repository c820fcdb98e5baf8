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

TEST(SelectBackend, ExplicitChoicesNeedNoProbe) {
    EXPECT_EQ(select_backend("cpu", "", "python3").backend, "cpu");
    EXPECT_EQ(select_backend("cpu", "cpu", "python3").device, "cpu");
    // The inductor worker's hello is what finds out whether torch sees a GPU.
    const auto inductor = select_backend("inductor", "", "/nonexistent/python3");
    EXPECT_EQ(inductor.backend, "inductor");
    EXPECT_EQ(inductor.device, "cuda");
    EXPECT_EQ(inductor.reason, "--backend inductor");
}

TEST(SelectBackend, UnsetOnTheCpuIsTheCpuBackend) {
    const auto selection = select_backend("", "cpu", "/nonexistent/python3");
    EXPECT_EQ(selection.backend, "cpu");
    EXPECT_EQ(selection.reason, "--device cpu");
}

TEST(SelectBackend, UnsetWithoutAGpuIsTheCpuBackend) {
    if (cuda_device_available()) GTEST_SKIP() << "a CUDA device is present";
    EXPECT_EQ(select_backend("", "", "python3").backend, "cpu");
}

TEST(SelectBackend, ContradictionsAndUnknownNamesAreBackendErrors) {
    const std::vector<std::pair<std::string, std::string>> bad{
        {"cpu", "cuda"}, {"native", "cpu"}, {"inductor", "cpu"}, {"triton", ""}};
    for (const auto& [backend, device] : bad) {
        try {
            select_backend(backend, device, "python3");
            FAIL() << backend << " on --device '" << device << "' accepted";
        } catch (const core::InputError& e) {
            EXPECT_EQ(e.subject(), "--backend") << e.what();
        }
    }
}

TEST(SelectBackend, NativeWithoutAUsableDeviceIsABackendError) {
    if (cuda_device_available()) GTEST_SKIP() << "a CUDA device is present";
    EXPECT_THROW(select_backend("native", "", "python3"), core::InputError);
}

}  // namespace
}  // namespace mmt::collect
