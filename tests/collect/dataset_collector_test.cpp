// DatasetCollector: collecting only between start and stop, tables, files.

#include "matmul_toolkit/collect/dataset_collector.hpp"

#include <gtest/gtest.h>

#include "matmul_toolkit/core/dataset_io.hpp"

namespace mmt::collect {
namespace {
namespace fs = std::filesystem;

core::TimedConfig timed(int block_m, double ms) {
    core::TimedConfig tc;
    tc.config.name = "mm_config";
    tc.config.block_m = block_m;
    tc.time_ms = ms;
    return tc;
}

ProblemResult result(std::int64_t m) {
    return {"GPU X", "mm", core::make_shape(1, m, 32, 32, "float32"), {timed(32, 2.0), timed(64, 1.0)}};
}

TEST(DatasetCollector, RecordsPublishedProblemsOnlyWhileCollecting) {
    DatasetCollector collector("my cpu");
    publish_result(result(10));
    collector.start_collection();
    EXPECT_TRUE(collector.is_collecting());
    publish_result(result(20));
    collector.start_collection();  // a warning, nothing else
    publish_result(result(30));
    collector.stop_collection();
    EXPECT_FALSE(collector.is_collecting());
    publish_result(result(40));
    collector.stop_collection();  // a warning, nothing else

    const auto& data = collector.get_dataset();
    EXPECT_EQ(data.num_problems(), 2u);
    ASSERT_EQ(data.hardware().size(), 1u);
    EXPECT_EQ(data.hardware()[0].name, "my cpu");  // the collector's name, not the result's
    EXPECT_TRUE(data.contains("my cpu", "mm", core::make_shape(1, 20, 32, 32, "float32")));
    EXPECT_TRUE(data.contains("my cpu", "mm", core::make_shape(1, 30, 32, 32, "float32")));
}

TEST(CollectionScope, StartsAndStopsTheCollector) {
    DatasetCollector collector("hw");
    {
        CollectionScope scope(collector);
        EXPECT_TRUE(collector.is_collecting());
        publish_result(result(1));
    }
    EXPECT_FALSE(collector.is_collecting());
    publish_result(result(2));
    EXPECT_EQ(collector.get_dataset().num_problems(), 1u);
}

TEST(DatasetCollector, TableListsConfigsFastestFirst) {
    DatasetCollector collector("hw");
    collector.add_problem("mm", core::make_shape(1, 8, 8, 8, "float32"),
                          {timed(16, 3.0), timed(32, 1.0), timed(64, 2.0)});
    const auto table = collector.to_table();
    ASSERT_EQ(table.size(), 1u);
    ASSERT_EQ(table[0].sorted_configs.size(), 3u);
    EXPECT_EQ(table[0].sorted_configs[0].config.block_m, 32);
    EXPECT_EQ(table[0].sorted_configs[1].config.block_m, 64);
    EXPECT_EQ(table[0].sorted_configs[2].config.block_m, 16);
}

TEST(DatasetCollector, SavesLoadsAndWritesTheTableAsTorchDiodesTable) {
    const fs::path dir = fs::temp_directory_path() / ("mmt_collector_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    DatasetCollector collector("hw");
    const auto shape = core::make_shape(1, 8, 16, 24, "float32");
    collector.add_problem("mm", shape, {timed(16, 3.0), timed(32, 1.0)});
    collector.save_to_file(dir / "data.msgpack");

    DatasetCollector loaded("other");
    loaded.load_from_file(dir / "data.msgpack");
    EXPECT_EQ(loaded.get_dataset().num_timings(), 2u);
    EXPECT_TRUE(loaded.get_dataset().contains("hw", "mm", shape));

    collector.save_table_to_file(dir / "table.json");
    const auto doc = core::load_document(dir / "table.json");
    const auto& solution = doc["hardware"]["hw"]["operation"]["mm"]["solution"][core::shape_key(shape)];
    ASSERT_EQ(solution["config"].size(), 2u);
    EXPECT_EQ(solution["config"][0]["block_m"], 32);
    EXPECT_EQ(solution["config"][1]["block_m"], 16);
    EXPECT_EQ(doc["version"], 1);
    fs::remove_all(dir);
}

TEST(FeedbackSavers, AllRegisteredSaversSeeEachResultUntilRemoved) {
    int a = 0, b = 0;
    const int id_a = add_feedback_saver([&](const ProblemResult&) { ++a; });
    const int id_b = add_feedback_saver([&](const ProblemResult&) { ++b; });
    publish_result(result(1));
    remove_feedback_saver(id_a);
    publish_result(result(2));
    remove_feedback_saver(id_b);
    publish_result(result(3));
    EXPECT_EQ(a, 1);
    EXPECT_EQ(b, 2);
}

}  // namespace
}  // namespace mmt::collect
