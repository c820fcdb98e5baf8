#include "nvrtc_compiler.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "cuda_check.hpp"

namespace mmt::collect::cuda {
namespace {

std::vector<std::string> nvrtc_options(const std::string& arch) {
    // The template includes no header, so no include path is needed: NVRTC's builtins
    // (its own bundled headers in CUDA 13) are all it uses.
    return {"--gpu-architecture=" + arch, "-std=c++17"};
}

struct ProgramDeleter {
    void operator()(nvrtcProgram* p) const {
        nvrtcDestroyProgram(p);
        delete p;
    }
};

}  // namespace

CompileResult compile_kernel(const std::string& prelude, std::string_view source, const std::string& arch) {
    const auto start = std::chrono::steady_clock::now();
    const std::string text = prelude + std::string(source);
    std::unique_ptr<nvrtcProgram, ProgramDeleter> program(new nvrtcProgram{});
    NVRTC_CHECK(nvrtcCreateProgram(program.get(), text.c_str(), "mmt_gemm.cu", 0, nullptr, nullptr));

    const std::vector<std::string> options = nvrtc_options(arch);
    std::vector<const char*> argv;
    for (const auto& o : options) argv.push_back(o.c_str());
    const nvrtcResult compiled = nvrtcCompileProgram(*program, static_cast<int>(argv.size()), argv.data());

    CompileResult result;
    std::size_t log_size = 0;
    NVRTC_CHECK(nvrtcGetProgramLogSize(*program, &log_size));
    if (log_size > 1) {
        result.log.resize(log_size);
        NVRTC_CHECK(nvrtcGetProgramLog(*program, result.log.data()));
        result.log.resize(log_size - 1);
    }
    if (compiled == NVRTC_SUCCESS) {
        std::size_t size = 0;
        if (arch.rfind("sm_", 0) == 0) {
            NVRTC_CHECK(nvrtcGetCUBINSize(*program, &size));
            result.image.resize(size);
            NVRTC_CHECK(nvrtcGetCUBIN(*program, result.image.data()));
        } else {
            NVRTC_CHECK(nvrtcGetPTXSize(*program, &size));
            result.image.resize(size);
            NVRTC_CHECK(nvrtcGetPTX(*program, result.image.data()));
        }
        result.ok = true;
    } else if (result.log.empty()) {
        result.log = nvrtcGetErrorString(compiled);
    }
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
}

std::string nvrtc_version() {
    int major = 0, minor = 0;
    NVRTC_CHECK(nvrtcVersion(&major, &minor));
    return std::to_string(major) + "." + std::to_string(minor);
}

std::string nvrtc_options_text(const std::string& arch) {
    std::string out;
    for (const auto& o : nvrtc_options(arch)) out += (out.empty() ? "" : " ") + o;
    return out;
}

std::string hash_hex(std::string_view text) {
    std::uint64_t h = 14695981039346656037ull;
    for (unsigned char c : text) {
        h ^= c;
        h *= 1099511628211ull;
    }
    static const char* digits = "0123456789abcdef";
    std::string out(16, '0');
    for (int i = 15; i >= 0; --i, h >>= 4) out[i] = digits[h & 15];
    return out;
}

}  // namespace mmt::collect::cuda
