#include "cublaslt_api.hpp"

#include <dlfcn.h>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect::cuda {
namespace {

struct LoadedCublasLt {
    CublasLtApi api;
    bool ok = false;
    std::string reason;
};

LoadedCublasLt load() {
    LoadedCublasLt l;
    const std::string file = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
    // Never dlclose'd: handles and plans live as long as the process. The loader's search
    // path first, then the toolkit the build found (where a linked library's rpath pointed).
    void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) handle = dlopen((std::string(MMT_CUDA_LIBRARY_DIR) + "/" + file).c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* err = dlerror();
        l.reason = "cannot load " + file + " (" + (err ? err : "not found") + ")";
        return l;
    }
#define MMT_RESOLVE_CUBLASLT(name)                                                \
    l.api.name = reinterpret_cast<decltype(l.api.name)>(dlsym(handle, #name));    \
    if (l.api.name == nullptr) {                                                  \
        l.reason = file + " lacks " #name;                                        \
        return l;                                                                 \
    }
    MMT_CUBLASLT_FUNCTIONS(MMT_RESOLVE_CUBLASLT)
#undef MMT_RESOLVE_CUBLASLT
    l.ok = true;
    return l;
}

const LoadedCublasLt& loaded() {
    static const LoadedCublasLt instance = load();
    return instance;
}

}  // namespace

const CublasLtApi* try_load_cublaslt() {
    const LoadedCublasLt& l = loaded();
    return l.ok ? &l.api : nullptr;
}

const CublasLtApi& cublaslt() {
    const CublasLtApi* api = try_load_cublaslt();
    if (api == nullptr) throw core::Error("cuBLAS", loaded().reason);
    return *api;
}

}  // namespace mmt::collect::cuda
