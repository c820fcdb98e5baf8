#include "matmul_toolkit/collect/dataset_collector.hpp"

#include <map>
#include <mutex>

#include <spdlog/spdlog.h>

namespace mmt::collect {
namespace {

// Savers run under the lock, so stop_collection() never returns while its saver is still
// being called; recursive, so a saver may itself publish.
std::recursive_mutex& registry_mutex() {
    static std::recursive_mutex mutex;
    return mutex;
}

std::map<int, FeedbackSaver>& registry() {
    static std::map<int, FeedbackSaver> savers;
    return savers;
}

int g_next_id = 0;

}  // namespace

int add_feedback_saver(FeedbackSaver saver) {
    std::lock_guard<std::recursive_mutex> lock(registry_mutex());
    const int id = g_next_id++;
    registry().emplace(id, std::move(saver));
    return id;
}

void remove_feedback_saver(int id) {
    std::lock_guard<std::recursive_mutex> lock(registry_mutex());
    registry().erase(id);
}

void publish_result(const ProblemResult& result) {
    std::lock_guard<std::recursive_mutex> lock(registry_mutex());
    for (const auto& [id, saver] : registry()) saver(result);
}

DatasetCollector::DatasetCollector(std::string hardware_name) : m_hardware(std::move(hardware_name)) {}

DatasetCollector::~DatasetCollector() {
    if (is_collecting()) remove_feedback_saver(m_saver_id);
}

void DatasetCollector::start_collection() {
    if (is_collecting()) {
        spdlog::warn("DatasetCollector: collection is already in progress");
        return;
    }
    m_saver_id = add_feedback_saver([this](const ProblemResult& result) {
        add_problem(result.op, result.shape, result.timed_configs);
    });
}

void DatasetCollector::stop_collection() {
    if (!is_collecting()) {
        spdlog::warn("DatasetCollector: no collection in progress");
        return;
    }
    remove_feedback_saver(m_saver_id);
    m_saver_id = -1;
}

void DatasetCollector::add_problem(const std::string& op, const core::MMShape& shape,
                                   const std::vector<core::TimedConfig>& timed_configs) {
    for (const auto& tc : timed_configs) m_dataset.add_timing(m_hardware, op, shape, tc);
}

std::vector<core::TableEntry> DatasetCollector::to_table() const { return m_dataset.to_table(); }

void DatasetCollector::save_to_file(const std::filesystem::path& path, core::DiodeLayout layout) const {
    core::save_dataset(m_dataset, path, layout);
}

void DatasetCollector::load_from_file(const std::filesystem::path& path) {
    m_dataset = core::load_dataset(path);
}

void DatasetCollector::save_table_to_file(const std::filesystem::path& path) const {
    core::save_document(table_to_document(to_table()), path);
}

core::OrderedJson table_to_document(const std::vector<core::TableEntry>& table) {
    core::OrderedJson hardware = core::OrderedJson::object();
    for (const auto& entry : table) {
        auto& hw = hardware[entry.hardware];
        if (!hw.contains("operation")) {
            hw["operation"] = core::OrderedJson::object();
            hw["version"] = 1;
        }
        auto& op = hw["operation"][entry.op];
        if (!op.contains("solution")) {
            op["solution"] = core::OrderedJson::object();
            op["version"] = 1;
        }
        core::OrderedJson configs = core::OrderedJson::array();
        for (const auto& tc : entry.sorted_configs) configs.push_back(core::config_to_document(tc.config));
        core::OrderedJson solution;
        solution["config"] = std::move(configs);
        solution["version"] = 1;
        op["solution"][core::shape_key(entry.shape)] = std::move(solution);
    }
    core::OrderedJson doc;
    doc["hardware"] = std::move(hardware);
    doc["version"] = 1;
    return doc;
}

}  // namespace mmt::collect
