#include "matmul_toolkit/core/csv_table.hpp"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/error.hpp"

namespace mmt::core {
namespace {

std::filesystem::path write(const std::string& name, const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() / ("mmt_csv_" + name);
    std::ofstream(path) << text;
    return path;
}

TEST(CsvTable, ReadsQuotedCellsAndWritesThemBack) {
    const auto path = write("quoted.csv", "name,value\r\n\"a, b\",1.5\n\n\"say \"\"hi\"\"\",2\n");
    const auto table = read_csv(path);
    ASSERT_EQ(table.columns, (std::vector<std::string>{"name", "value"}));
    ASSERT_EQ(table.rows.size(), 2u);
    EXPECT_EQ(table.rows[0][0], "a, b");
    EXPECT_EQ(table.rows[1][0], "say \"hi\"");
    EXPECT_EQ(csv_numbers(table, csv_column(table, "value", "--target"), "f"), (std::vector<double>{1.5, 2.0}));
    EXPECT_EQ(csv_text(table), "name,value\n\"a, b\",1.5\n\"say \"\"hi\"\"\",2\n");
}

TEST(CsvTable, BadFilesAreClearErrors) {
    EXPECT_THROW(read_csv("/nonexistent/x.csv"), InputError);
    EXPECT_THROW(read_csv(write("empty.csv", "")), InputError);
    EXPECT_THROW(read_csv(write("dup.csv", "a,a\n1,2\n")), InputError);
    try {
        read_csv(write("ragged.csv", "a,b\n1,2\n3\n"));
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
    }
    const auto table = read_csv(write("text.csv", "a,b\n1,x\n"));
    try {
        csv_numbers(table, 1, "text.csv");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("row 1, column 'b'"), std::string::npos) << e.what();
    }
    try {
        csv_column(table, "c", "--target");
        FAIL();
    } catch (const InputError& e) {
        EXPECT_EQ(e.subject(), "--target");
        EXPECT_NE(std::string(e.what()).find("a, b"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace mmt::core
