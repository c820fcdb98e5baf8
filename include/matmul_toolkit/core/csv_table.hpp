#pragma once
/// A CSV file as a header and rows of text cells: what train-table and predict-table read
/// and write. Commas separate cells; a cell in double quotes may hold commas and "" for a
/// quote. Numbers are parsed where a column is used, so an error names file, row and column.

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace mmt::core {

struct CsvTable {
    std::vector<std::string> columns;
    std::vector<std::vector<std::string>> rows;  ///< each as wide as `columns`
};

/// Throws InputError(path, ...) when the file can't be read, is empty, has a duplicate or
/// empty column name, or a row whose cell count differs from the header's (naming the line).
CsvTable read_csv(const std::filesystem::path& path);

/// The column's index; throws InputError(option, ...) listing the columns when it is absent.
std::size_t csv_column(const CsvTable& table, const std::string& name, const std::string& option);

/// The cells of `column` as finite numbers; throws InputError(source, "row N, column 'C': ...")
/// (rows counted from 1 after the header) at the first cell that is not one.
std::vector<double> csv_numbers(const CsvTable& table, std::size_t column, const std::string& source);

/// The table as CSV text (cells quoted where they hold a comma, quote or newline).
std::string csv_text(const CsvTable& table);

}  // namespace mmt::core
