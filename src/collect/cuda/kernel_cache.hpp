#pragma once
/// Compiled kernels, cached in memory and on disk, compiled ahead on worker threads so the
/// GPU does not wait for the compiler.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace mmt::collect::cuda {

class CompileWorker;

/// One cache entry's outcome.
struct CompiledKernel {
    bool ok = false;
    std::string image;  ///< CUBIN or PTX
    std::string log;    ///< the compiler's log (the error when !ok)
    bool from_disk = false;
    double compile_seconds = 0.0;
};

/// Counters for reports and tests.
struct KernelCacheStats {
    std::size_t compiled = 0;      ///< NVRTC compilations run
    std::size_t disk_hits = 0;     ///< images read back from disk
    std::size_t failures = 0;      ///< compilations that failed
    double compile_seconds = 0.0;  ///< summed over worker threads
    double wait_seconds = 0.0;     ///< time get() callers spent waiting for a compile
    std::size_t planned = 0;       ///< preludes handed to plan()
};

/// Kernels keyed by (kernel-source hash, NVRTC version and options, target arch, prelude).
/// Disk entries live in `disk_dir` as <hash>.cubin|.ptx, written atomically (temp file +
/// rename) so several processes can share the directory.
class KernelCache {
public:
    /// `arch` is an NVRTC target ("sm_90", or "compute_90" for PTX); an empty `disk_dir`
    /// keeps the cache in memory only; `threads` compile ahead (0: hardware threads - 1),
    /// each through its own forked NVRTC process (see CompileWorker).
    KernelCache(std::string_view source, std::string arch, std::filesystem::path disk_dir, int threads = 0);
    ~KernelCache();
    KernelCache(const KernelCache&) = delete;
    KernelCache& operator=(const KernelCache&) = delete;

    /// Queues the compilation of prelude + source unless it is cached or queued already.
    void prefetch(const std::string& prelude);

    /// Kernels to build in the background, in this order, whenever no prefetch() is waiting;
    /// they go ahead of what earlier plans still have left. With a disk cache, a planned
    /// kernel nobody has asked for yet is dropped from memory once it is on disk, so a plan
    /// of thousands of kernels holds only their preludes; get() reads it back from disk.
    /// Without one, images stay in memory, so only the first kMaxPlannedInMemory are taken.
    void plan(std::vector<std::string> preludes);

    static constexpr std::size_t kMaxPlannedInMemory = 2048;

    /// The kernel for the prelude: from memory, from disk, from a worker, or compiled on
    /// the calling thread when no worker has started it yet.
    std::shared_ptr<const CompiledKernel> get(const std::string& prelude);

    KernelCacheStats stats() const;
    /// Entries in memory: asked-for kernels (built, building or queued) and planned ones
    /// still building or, without a disk cache, built.
    std::size_t in_memory() const;
    const std::string& arch() const { return m_arch; }
    const std::filesystem::path& disk_dir() const { return m_disk_dir; }

    /// $XDG_CACHE_HOME/matmul_toolkit/kernels, else ~/.cache/matmul_toolkit/kernels.
    static std::filesystem::path default_disk_dir();

private:
    struct Entry;

    std::shared_ptr<Entry> find_or_add(const std::string& prelude, bool queue);
    std::shared_ptr<Entry> take_planned();  // the next planned kernel not yet known; m_mutex held
    void run(Entry& entry, CompileWorker* worker);
    std::shared_ptr<const CompiledKernel> build(const std::string& prelude, CompileWorker* worker);
    std::string key_text(const std::string& prelude) const;
    std::shared_ptr<CompiledKernel> read_disk(const std::string& key) const;
    void write_disk(const std::string& key, const CompiledKernel& kernel);
    void worker_loop(std::unique_ptr<CompileWorker> worker);

    std::string m_source;
    std::string m_arch;
    std::filesystem::path m_disk_dir;
    std::string m_key_header;  // source hash, NVRTC version, options, arch

    mutable std::mutex m_mutex;
    std::condition_variable m_queue_cv;
    std::unordered_map<std::string, std::shared_ptr<Entry>> m_entries;
    std::deque<std::shared_ptr<Entry>> m_queue;
    std::vector<std::string> m_plan;  // plan(): taken in order when m_queue is empty
    std::size_t m_plan_next = 0;
    std::vector<std::thread> m_workers;
    bool m_stopping = false;
    bool m_disk_ok = true;
    KernelCacheStats m_stats;
};

}  // namespace mmt::collect::cuda
