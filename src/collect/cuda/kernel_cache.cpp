#include "kernel_cache.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include <spdlog/spdlog.h>

#include "compile_worker.hpp"
#include "nvrtc_compiler.hpp"

namespace mmt::collect::cuda {

struct KernelCache::Entry {
    std::string prelude;
    enum class State { queued, running, done } state = State::queued;
    bool planned_only = false;  // taken from the plan, and no get()/prefetch() asked for it yet
    std::shared_ptr<const CompiledKernel> result;
    std::condition_variable done_cv;
};

namespace {

constexpr const char* kMagic = "mmt-kernel-cache 1";

std::string read_all(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return {};
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

KernelCache::KernelCache(std::string_view source, std::string arch, std::filesystem::path disk_dir, int threads)
    : m_source(source), m_arch(std::move(arch)), m_disk_dir(std::move(disk_dir)) {
    m_key_header = std::string(kMagic) + "\nsource " + hash_hex(m_source) + "\nnvrtc " + nvrtc_version() +
                   "\noptions " + nvrtc_options_text(m_arch) + "\n";
    if (m_disk_dir.empty()) {
        m_disk_ok = false;
    } else {
        std::error_code ec;
        std::filesystem::create_directories(m_disk_dir, ec);
        if (ec) {
            spdlog::warn("kernel cache: cannot create {} ({}); compiled kernels stay in memory", m_disk_dir.string(),
                         ec.message());
            m_disk_ok = false;
        }
    }
    if (threads <= 0) threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - 1);
    // Every process is forked before any of this cache's threads exists (see CompileWorker).
    std::vector<std::unique_ptr<CompileWorker>> processes;
    for (int i = 0; i < threads; ++i) processes.push_back(CompileWorker::spawn(m_source));
    for (auto& p : processes) m_workers.emplace_back([this, w = p.release()] { worker_loop(std::unique_ptr<CompileWorker>(w)); });
}

KernelCache::~KernelCache() {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stopping = true;
    }
    m_queue_cv.notify_all();
    for (auto& t : m_workers) t.join();
}

std::filesystem::path KernelCache::default_disk_dir() {
    if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
        return std::filesystem::path(xdg) / "matmul_toolkit" / "kernels";
    if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
        return std::filesystem::path(home) / ".cache" / "matmul_toolkit" / "kernels";
    return {};
}

std::string KernelCache::key_text(const std::string& prelude) const { return m_key_header + prelude; }

std::shared_ptr<KernelCache::Entry> KernelCache::find_or_add(const std::string& prelude, bool queue) {
    std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_entries.find(prelude);
    if (it != m_entries.end()) {
        it->second->planned_only = false;
        return it->second;
    }
    auto entry = std::make_shared<Entry>();
    entry->prelude = prelude;
    m_entries.emplace(prelude, entry);
    if (queue) {
        m_queue.push_back(entry);
        m_queue_cv.notify_one();
    }
    return entry;
}

void KernelCache::prefetch(const std::string& prelude) { find_or_add(prelude, true); }

void KernelCache::plan(std::vector<std::string> preludes) {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_stats.planned += preludes.size();
        // The earlier plan's remainder follows: a worker process plans the whole run, then
        // each problem it is handed plans its own kernels first.
        preludes.insert(preludes.end(), std::make_move_iterator(m_plan.begin() + static_cast<std::ptrdiff_t>(m_plan_next)),
                        std::make_move_iterator(m_plan.end()));
        if (!m_disk_ok && preludes.size() > kMaxPlannedInMemory) preludes.resize(kMaxPlannedInMemory);
        m_plan = std::move(preludes);
        m_plan_next = 0;
    }
    m_queue_cv.notify_all();
}

std::shared_ptr<const CompiledKernel> KernelCache::get(const std::string& prelude) {
    auto entry = find_or_add(prelude, false);
    std::unique_lock<std::mutex> lock(m_mutex);
    if (entry->state == Entry::State::queued) {
        // Not started by a worker: build it here rather than wait behind the queue.
        entry->state = Entry::State::running;
        lock.unlock();
        run(*entry, nullptr);
        lock.lock();
    } else if (entry->state == Entry::State::running) {
        const auto start = std::chrono::steady_clock::now();
        entry->done_cv.wait(lock, [&] { return entry->state == Entry::State::done; });
        m_stats.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return entry->result;
}

void KernelCache::run(Entry& entry, CompileWorker* worker) {
    std::shared_ptr<const CompiledKernel> result;
    try {
        result = build(entry.prelude, worker);
    } catch (const std::exception& e) {
        auto failed = std::make_shared<CompiledKernel>();
        failed->log = e.what();
        result = failed;
    }
    std::lock_guard<std::mutex> lock(m_mutex);
    entry.result = result;
    entry.state = Entry::State::done;
    entry.done_cv.notify_all();
    // A planned kernel that is safely on disk need not stay in memory until it is used.
    if (entry.planned_only && result->ok && m_disk_ok) {
        auto it = m_entries.find(entry.prelude);
        if (it != m_entries.end() && it->second.get() == &entry) m_entries.erase(it);
    }
}

std::shared_ptr<const CompiledKernel> KernelCache::build(const std::string& prelude, CompileWorker* worker) {
    const std::string key = key_text(prelude);
    if (auto cached = read_disk(key)) {
        std::lock_guard<std::mutex> lock(m_mutex);
        ++m_stats.disk_hits;
        return cached;
    }
    CompileResult compiled;
    bool in_process = worker == nullptr || !worker->alive();
    if (!in_process) {
        try {
            compiled = worker->compile(prelude, m_arch);
        } catch (const std::exception& e) {
            // The process died (crash, OOM kill): this thread compiles in-process from now on.
            spdlog::warn("kernel cache: {}; compiling in-process", e.what());
            in_process = true;
        }
    }
    if (in_process) compiled = compile_kernel(prelude, m_source, m_arch);
    auto kernel = std::make_shared<CompiledKernel>();
    kernel->ok = compiled.ok;
    kernel->image = compiled.image;
    kernel->log = compiled.log;
    kernel->compile_seconds = compiled.seconds;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        ++m_stats.compiled;
        m_stats.compile_seconds += compiled.seconds;
        if (!compiled.ok) ++m_stats.failures;
    }
    if (kernel->ok) write_disk(key, *kernel);
    return kernel;
}

std::shared_ptr<CompiledKernel> KernelCache::read_disk(const std::string& key) const {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (!m_disk_ok) return nullptr;
    }
    const auto path = m_disk_dir / (hash_hex(key) + (m_arch.rfind("sm_", 0) == 0 ? ".cubin" : ".ptx"));
    const std::string content = read_all(path);
    // An entry is "<key length>\n<key><image>"; a different key (hash collision) or a
    // short file (never, given atomic writes, but cheap to check) counts as a miss.
    const auto newline = content.find('\n');
    if (newline == std::string::npos) return nullptr;
    std::size_t key_length = 0;
    try {
        key_length = std::stoul(content.substr(0, newline));
    } catch (...) {
        return nullptr;
    }
    if (content.size() <= newline + 1 + key_length || content.compare(newline + 1, key_length, key) != 0)
        return nullptr;
    auto kernel = std::make_shared<CompiledKernel>();
    kernel->ok = true;
    kernel->from_disk = true;
    kernel->image = content.substr(newline + 1 + key_length);
    return kernel;
}

void KernelCache::write_disk(const std::string& key, const CompiledKernel& kernel) {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (!m_disk_ok) return;
    }
    static std::atomic<unsigned> counter{0};
    const auto path = m_disk_dir / (hash_hex(key) + (m_arch.rfind("sm_", 0) == 0 ? ".cubin" : ".ptx"));
    // A name no other process or thread uses, then rename(): readers see all or nothing.
    auto temp = path;
    temp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    bool ok;
    {
        std::ofstream out(temp, std::ios::binary | std::ios::trunc);
        out << key.size() << '\n' << key << kernel.image;
        out.flush();
        ok = static_cast<bool>(out);
    }
    std::error_code ec;
    if (ok) std::filesystem::rename(temp, path, ec);
    if (!ok || ec) {
        std::filesystem::remove(temp, ec);
        std::lock_guard<std::mutex> lock(m_mutex);
        if (m_disk_ok)
            spdlog::warn("kernel cache: cannot write {}; compiled kernels stay in memory", m_disk_dir.string());
        m_disk_ok = false;
    }
}

void KernelCache::worker_loop(std::unique_ptr<CompileWorker> worker) {
    for (;;) {
        std::shared_ptr<Entry> entry;
        {
            std::unique_lock<std::mutex> lock(m_mutex);
            m_queue_cv.wait(lock, [this] { return m_stopping || !m_queue.empty() || m_plan_next < m_plan.size(); });
            if (m_stopping) return;
            if (!m_queue.empty()) {
                entry = m_queue.front();
                m_queue.pop_front();
                if (entry->state != Entry::State::queued) continue;  // get() took it
            } else {
                entry = take_planned();
                if (!entry) continue;
            }
            entry->state = Entry::State::running;
        }
        run(*entry, worker.get());
    }
}

std::shared_ptr<KernelCache::Entry> KernelCache::take_planned() {
    while (m_plan_next < m_plan.size()) {
        std::string& prelude = m_plan[m_plan_next++];
        if (m_entries.count(prelude) != 0) continue;  // asked for, built or building already
        auto entry = std::make_shared<Entry>();
        entry->prelude = std::move(prelude);
        entry->planned_only = true;
        m_entries.emplace(entry->prelude, entry);
        return entry;
    }
    m_plan.clear();
    m_plan.shrink_to_fit();
    m_plan_next = 0;
    return nullptr;
}

std::size_t KernelCache::in_memory() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_entries.size();
}

KernelCacheStats KernelCache::stats() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_stats;
}

}  // namespace mmt::collect::cuda
