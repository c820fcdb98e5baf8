// Every shipped model (data/models/NAME.pt) has a model card (data/models/NAME.md) that says
// what the checkpoint itself records. The card's first ```json block holds the recipe's
// values; each must be what the checkpoint stores (Predictor::load(...).info()) or, for what
// a checkpoint does not store (the ranking loss, the test fraction), what the card's train
// command (its ```bash block running `train`) passes. Every flag of that command must be in
// the block with the same value, so the command, the block and the file cannot drift apart.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "matmul_toolkit/model/predictor.hpp"

namespace mmt {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kModels = fs::path(MMT_SOURCE_DIR) / "data" / "models";

std::vector<std::string> read_lines(const fs::path& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

/// The lines of each fenced block whose info string starts with `language`.
std::vector<std::vector<std::string>> fenced_blocks(const std::vector<std::string>& lines,
                                                    const std::string& language) {
    std::vector<std::vector<std::string>> blocks;
    bool inside = false, wanted = false;
    for (const auto& line : lines) {
        if (line.rfind("```", 0) == 0) {
            if (!inside) {
                const std::string info = line.substr(3);
                wanted = info.rfind(language, 0) == 0;
                if (wanted) blocks.emplace_back();
            }
            inside = !inside;
            continue;
        }
        if (inside && wanted) blocks.back().push_back(line);
    }
    return blocks;
}

/// The train command's flags: `--name value`, a repeated flag's values in order, a flag
/// without a value (`--no-aten`) as "true". Line continuations are joined.
std::map<std::string, std::vector<std::string>> train_flags(const std::vector<std::string>& block) {
    std::vector<std::string> commands{""};
    for (const auto& line : block) {
        std::string text = line;
        const bool continued = !text.empty() && text.back() == '\\';
        if (continued) text.pop_back();
        commands.back() += text + " ";
        if (!continued) commands.emplace_back();
    }
    std::map<std::string, std::vector<std::string>> flags;
    for (const auto& command : commands) {
        if (command.find(" train ") == std::string::npos) continue;
        std::istringstream words(command);
        std::vector<std::string> tokens;
        for (std::string w; words >> w;) tokens.push_back(w);
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            if (tokens[i].rfind("--", 0) != 0) continue;
            const std::string name = tokens[i].substr(2);
            const bool has_value =
                i + 1 < tokens.size() && tokens[i + 1].rfind("--", 0) != 0 && tokens[i + 1] != "train";
            flags[name].push_back(has_value ? tokens[++i] : "true");
        }
        break;
    }
    return flags;
}

/// A card value and a command-line value agree: numbers by value, lists element by element
/// ("96,48" against [96, 48]), booleans and strings as written.
bool same_value(const json& card, const std::string& text) {
    if (card.is_boolean()) return text == (card.get<bool>() ? "true" : "false");
    if (card.is_number()) {
        try {
            return std::abs(card.get<double>() - std::stod(text)) <= 1e-12 * std::max(1.0, std::abs(card.get<double>()));
        } catch (const std::exception&) {
            return false;
        }
    }
    if (card.is_array()) {
        std::vector<std::string> parts;
        std::stringstream in(text);
        for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
        if (parts.size() != card.size()) return false;
        for (std::size_t i = 0; i < parts.size(); ++i) {
            if (!same_value(card[i], parts[i])) return false;
        }
        return true;
    }
    return card.is_string() && card.get<std::string>() == text;
}

std::string flag_name(const std::string& key) {
    std::string name = key;
    for (char& c : name) {
        if (c == '_') c = '-';
    }
    return name;
}

struct Card {
    json block;
    std::map<std::string, std::vector<std::string>> command;
};

Card read_card(const fs::path& path) {
    const auto lines = read_lines(path);
    Card card;
    const auto json_blocks = fenced_blocks(lines, "json");
    if (json_blocks.empty()) ADD_FAILURE() << path << ": no ```json block";
    else {
        std::string text;
        for (const auto& line : json_blocks.front()) text += line + "\n";
        card.block = json::parse(text);
    }
    for (const auto& block : fenced_blocks(lines, "bash")) {
        auto flags = train_flags(block);
        if (!flags.empty()) {
            card.command = std::move(flags);
            break;
        }
    }
    if (card.command.empty()) ADD_FAILURE() << path << ": no ```bash block with a train command";
    return card;
}

bool close(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(1.0, std::abs(a)); }

std::vector<fs::path> shipped_models() {
    std::vector<fs::path> models;
    for (const auto& entry : fs::directory_iterator(kModels)) {
        if (entry.path().extension() == ".pt") models.push_back(entry.path());
    }
    std::sort(models.begin(), models.end());
    return models;
}

TEST(ModelCard, EveryShippedModelHasOne) {
    const auto models = shipped_models();
    ASSERT_FALSE(models.empty()) << kModels;
    for (const auto& model : models) {
        EXPECT_TRUE(fs::exists(fs::path(model).replace_extension(".md"))) << model << " has no model card";
    }
}

TEST(ModelCard, RecipeIsWhatTheCheckpointAndTheTrainCommandSay) {
    for (const auto& model : shipped_models()) {
        const fs::path card_path = fs::path(model).replace_extension(".md");
        if (!fs::exists(card_path)) continue;  // EveryShippedModelHasOne reports it
        SCOPED_TRACE(card_path.string());
        const Card card = read_card(card_path);
        ASSERT_TRUE(card.block.contains("train_options")) << "the ```json block has no train_options";
        const json& options = card.block["train_options"];
        const model::ModelInfo info = model::Predictor::load(model).info();

        // What the checkpoint stores, by the card's key.
        const int members = info.ensemble;
        std::vector<int> member_dims;
        for (int width : info.spec.hidden_dims) member_dims.push_back(width / std::max(members, 1));
        std::set<std::string> stored;
        auto check_number = [&](const std::string& key, double value) {
            stored.insert(key);
            if (!options.contains(key)) return;
            EXPECT_TRUE(close(options[key].get<double>(), value))
                << key << ": card " << options[key] << ", checkpoint " << value;
        };
        check_number("ensemble", info.ensemble);
        check_number("dropout", info.spec.dropout_rate);
        check_number("learning_rate", info.learning_rate);
        check_number("weight_decay", info.weight_decay);
        check_number("batch_size", info.batch_size);
        check_number("num_epochs", info.num_epochs);
        check_number("patience", info.patience);
        check_number("lr_decay_after", info.lr_decay_after);
        check_number("weight_average", info.weight_average);
        if (info.lr_decay_after > 0) check_number("lr_decay", info.lr_decay);
        stored.insert("model_type");
        if (options.contains("model_type")) {
            EXPECT_EQ(options["model_type"].get<std::string>(), model::to_string(info.spec.type));
        }
        stored.insert("hidden_dims");
        if (options.contains("hidden_dims")) {
            EXPECT_EQ(options["hidden_dims"].get<std::vector<int>>(), member_dims)
                << "each member's widths (the checkpoint's " << info.ensemble << " members side by side)";
        }
        stored.insert("seed");
        if (options.contains("seed")) EXPECT_EQ(std::to_string(options["seed"].get<long long>()), info.seed);
        stored.insert("no_vendor_rows");
        if (options.contains("no_vendor_rows")) EXPECT_EQ(options["no_vendor_rows"].get<bool>(), !info.vendor_rows);

        // Every flag of the card's command is in the block, with the same value.
        for (const auto& [flag, values] : card.command) {
            std::string key = flag;
            for (char& c : key) {
                if (c == '-') c = '_';
            }
            if (key == "dataset") {
                ASSERT_TRUE(card.block.contains("datasets")) << "the command's --dataset files are not in the block";
                EXPECT_EQ(card.block["datasets"].get<std::vector<std::string>>(), values);
                continue;
            }
            ASSERT_TRUE(options.contains(key)) << "--" << flag << " " << values.front() << " is not in train_options";
            ASSERT_EQ(values.size(), 1u) << "--" << flag << " given twice";
            EXPECT_TRUE(same_value(options[key], values.front()))
                << "--" << flag << ": command " << values.front() << ", card " << options[key];
        }
        // ... and nothing in the block is unchecked: each value is stored or in the command.
        for (const auto& [key, value] : options.items()) {
            EXPECT_TRUE(stored.count(key) > 0 || card.command.count(flag_name(key)) > 0)
                << key << " is neither in the checkpoint nor in the card's train command";
        }

        // The facts of the training run the checkpoint records.
        if (card.block.contains("hardware_name")) {
            EXPECT_EQ(card.block["hardware_name"].get<std::string>(), info.hardware_name);
        }
        if (card.block.contains("train_problems")) {
            EXPECT_EQ(card.block["train_problems"].get<std::size_t>(), info.train_problems);
        }
        if (card.block.contains("train_rows")) {
            EXPECT_EQ(card.block["train_rows"].get<std::size_t>(), info.train_rows);
        }
        if (card.block.contains("toolkit_version")) {
            EXPECT_EQ(card.block["toolkit_version"].get<std::string>(), info.toolkit_version);
        }
    }
}

}  // namespace
}  // namespace mmt
