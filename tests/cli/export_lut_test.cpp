// `export-lut` through the binary: an Inductor lookup table from a shapeset, a
// torch-diode Table from a dataset, device keys, the rule flags, the policies, bad input.

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.hpp"
#include "tiny_model_fixture.hpp"

namespace mmt::testing {
namespace {
namespace fs = std::filesystem;

class ExportLutCli : public TinyModelCli<ExportLutCli> {
public:
    static constexpr const char* kCommand = "export-lut";

    struct Exported {
        CliResult result;
        nlohmann::json table;  ///< null when the command failed
    };
    /// Runs export-lut with --output DIR/FILE and reads the table it wrote.
    Exported export_table(const std::string& file, std::vector<std::string> args) {
        const auto output = *dir / file;
        args.insert(args.end(), {"--output", output.string()});
        Exported exported{run(args), nullptr};
        if (exported.result.exit_code == 0) exported.table = nlohmann::json::parse(slurp(output));
        return exported;
    }
    /// export_table with the arguments `base` followed by `extra`.
    Exported export_table(const std::string& file, std::vector<std::string> base,
                          const std::vector<std::string>& extra) {
        base.insert(base.end(), extra.begin(), extra.end());
        return export_table(file, std::move(base));
    }
    /// export_table with the shipped H200 Inductor model instead of the suite's tiny one
    /// (trained a few epochs on CPU timings, it picks light tiles and ranks ATen first on
    /// no GEMV).
    Exported export_with_shipped_model(const std::string& file, std::vector<std::string> args) {
        const auto output = *dir / file;
        args.insert(args.begin(), {"--device", "cpu", "export-lut", "--model",
                                   std::string(MMT_SOURCE_DIR) + "/data/models/inductor_h200.pt"});
        args.insert(args.end(), {"--output", output.string()});
        Exported exported{run_cli(args, *dir / "run"), nullptr};
        if (exported.result.exit_code == 0) exported.table = nlohmann::json::parse(slurp(output));
        return exported;
    }
};

/// The example shapeset with the Ks `ks` in turn, and every M set to `m` where given (written
/// into `dir`): the compile margins apply only where K is long enough for unrolling to cost
/// compile time, --aten-alone-gemv where M = 1.
std::string shapeset_with_ks(const fs::path& dir, const std::vector<std::int64_t>& ks, std::int64_t m = 0) {
    auto shapeset = nlohmann::json::parse(slurp(example_shapeset()));
    std::size_t index = 0;
    for (auto& [op, entry] : shapeset.at("operations").items()) {
        for (auto& shape : entry.at("shapes")) {
            shape["K"] = ks[index++ % ks.size()];
            if (m > 0) {
                shape["M"] = m;
                shape["out_size"][1] = m;
                shape["out_stride"][0] = m * shape["N"].get<std::int64_t>();
            }
        }
    }
    std::string name = "shapes";
    for (const auto k : ks) name += "_k" + std::to_string(k);
    const auto path = dir / (name + "_m" + std::to_string(m) + ".json");
    std::ofstream(path) << shapeset.dump();
    return path.string();
}

std::string shapeset_with_k(const fs::path& dir, std::int64_t k, std::int64_t m = 0) {
    return shapeset_with_ks(dir, {k}, m);
}

// Entries of one Inductor key that are ATen choices (addmm has two).
std::size_t aten_entries(const nlohmann::json& entries) {
    std::size_t aten = 0;
    for (const auto& e : entries) aten += e.at("template_id").get<std::string>().rfind("aten::", 0) == 0;
    return aten;
}

TEST_F(ExportLutCli, InductorTableFromAShapeset) {
    const auto [result, table] = export_table(
        "inductor.json", {"--shapeset", example_shapeset(), "--top-k", "3", "--no-prune"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    ASSERT_EQ(table.size(), 5u);
    // The shapeset's first problem: mm 128x128x128 float32, row-major operands.
    const std::string mm_key =
        "((torch.float32, [128, 128], [128, 1]), (torch.float32, [128, 128], [128, 1]))+mm";
    ASSERT_TRUE(table.contains(mm_key)) << table.dump(1).substr(0, 400);
    int addmm = 0, bmm = 0;
    for (const auto& [key, entries] : table.items()) {
        const bool is_bmm = key.size() > 4 && key.compare(key.size() - 4, 4, "+bmm") == 0;
        const bool is_addmm = key.find("+alpha=1&beta=1+addmm") != std::string::npos;
        addmm += is_addmm;
        bmm += is_bmm;
        // Three picks, and ATen whether picked or not (Inductor's fallback when a
        // benchmarked table's Triton layouts fail): one entry, addmm's two (bias_addmm,
        // addmm), last when it was not a pick.
        const std::size_t aten = aten_entries(entries);
        ASSERT_EQ(aten, is_addmm ? 2u : 1u) << key;
        const std::size_t triton = entries.size() - aten;
        ASSERT_TRUE(triton == 3u || triton == 2u) << key;
        if (triton == 3u) EXPECT_EQ(entries.back().at("template_id").get<std::string>().rfind("aten::", 0), 0u) << key;
        for (const auto& e : entries) {
            if (e.at("template_id").get<std::string>().rfind("aten::", 0) == 0) {
                EXPECT_EQ(e.size(), 1u) << e.dump();  // an ATen choice has no config
                continue;
            }
            EXPECT_EQ(e.at("template_id"), is_bmm ? "triton::bmm" : "triton::mm");
            for (const char* field : {"BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_stages", "num_warps",
                                      "EVEN_K", "USE_FAST_ACCUM", "ACC_TYPE"}) {
                EXPECT_TRUE(e.contains(field)) << field;
            }
        }
    }
    EXPECT_EQ(addmm, 1);
    EXPECT_EQ(bmm, 1);
    EXPECT_NE(result.out.find("wrote 5 problems, 15 configs"), std::string::npos) << result.out;
}

TEST_F(ExportLutCli, DeviceKeyPrefixesEveryKey) {
    const auto [result, table] = export_table(
        "device.json", {"--shapeset", example_shapeset(), "--top-k", "1", "--device-key", "NVIDIA H100 80GB HBM3"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    ASSERT_EQ(table.size(), 5u);
    for (const auto& [key, entries] : table.items()) {
        EXPECT_EQ(key.rfind("NVIDIA H100 80GB HBM3+((", 0), 0u) << key;
    }
}

TEST_F(ExportLutCli, DiodeTableFromADatasetRanksItsMeasuredConfigs) {
    const auto [result, table] = export_table(
        "diode.json", {"--dataset", sample_dataset(), "--top-k", "2", "--lut-format", "diode"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto& ops = table.at("hardware").at("AMD EPYC").at("operation");
    ASSERT_EQ(ops.at("mm").at("solution").size(), 3u);
    ASSERT_EQ(ops.at("addmm").at("solution").size(), 1u);
    for (const auto& [shape, solution] : ops.at("mm").at("solution").items()) {
        ASSERT_EQ(solution.at("config").size(), 2u);
        for (const auto& c : solution.at("config")) {
            // A measured config, or the vendor entry the tiny model learned (aten_mm).
            EXPECT_TRUE(c.at("name") == "mm_config" || c.at("name") == "aten_mm") << c.dump();
            EXPECT_EQ(c.at("num_stages"), 1);  // the CPU sample's tiles (aten_mm: 1 too)
        }
    }
}

TEST_F(ExportLutCli, WithAtenATopOneTableOffersAtenBesideItsPick) {
    const auto [result, table] = export_table(
        "with_aten.json", {"--shapeset", example_shapeset(), "--top-k", "1", "--with-aten", "--no-prune"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    ASSERT_EQ(table.size(), 5u);
    for (const auto& [key, entries] : table.items()) {
        const bool is_addmm = key.find("+alpha=1&beta=1+addmm") != std::string::npos;
        const std::size_t aten = aten_entries(entries);
        EXPECT_EQ(aten, is_addmm ? 2u : 1u) << key;
        // One Triton config, the model's best-ranked kernel config, beside ATen: also where
        // the model ranks ATen first.
        EXPECT_EQ(entries.size() - aten, 1u) << key;
    }
}

// --aten-within: a huge margin pairs ATen with every pick (as --with-aten alone), and so does
// --aten-from 0; a margin of 0 leaves each problem the one choice predicted faster, and so
// does --aten-from a time no problem takes.
TEST_F(ExportLutCli, AtenWithinPairsOnlyWherePredictedClose) {
    const std::vector<std::string> base{"--shapeset", example_shapeset(), "--top-k", "1", "--with-aten", "--no-prune"};
    auto with_rule = [&](const std::string& option, const std::string& value) {
        auto args = base;
        args.insert(args.end(), {option, value});
        return export_table(option.substr(2) + "_" + value + ".json", args);
    };
    auto with_margin = [&](const std::string& percent) { return with_rule("--aten-within", percent); };
    EXPECT_EQ(with_rule("--aten-from", "0").table, with_margin("1000000").table);
    EXPECT_EQ(with_rule("--aten-from", "1e12").table, with_margin("0").table);
    const auto paired = with_margin("1000000");
    ASSERT_EQ(paired.result.exit_code, 0) << paired.result.err;
    const auto always = export_table("always.json", base);
    ASSERT_EQ(always.result.exit_code, 0) << always.result.err;
    for (const auto& [key, entries] : always.table.items()) {
        ASSERT_TRUE(paired.table.contains(key)) << key;
        // The same two choices; only their order may differ (ranked order).
        EXPECT_EQ(paired.table.at(key).size(), entries.size()) << key;
        EXPECT_EQ(aten_entries(paired.table.at(key)), aten_entries(entries)) << key;
    }
    EXPECT_NE(paired.result.out.find("ATen beside the kernel pick on 5 problems, ATen alone on 0, the kernel "
                                     "pick alone on 0"),
              std::string::npos)
        << paired.result.out;

    const auto alone = with_margin("0");
    ASSERT_EQ(alone.result.exit_code, 0) << alone.result.err;
    ASSERT_EQ(alone.table.size(), 5u);
    std::size_t aten_alone = 0;
    for (const auto& [key, entries] : alone.table.items()) {
        const std::size_t aten = aten_entries(entries);
        // ATen alone (addmm: its two ATen choices), or one Triton config alone.
        EXPECT_TRUE(aten == entries.size() || (aten == 0 && entries.size() == 1u)) << key << " " << entries.dump();
        aten_alone += aten > 0;
    }
    EXPECT_NE(alone.result.out.find("ATen beside the kernel pick on 0 problems, ATen alone on " +
                                    std::to_string(aten_alone)),
              std::string::npos)
        << alone.result.out;
}

/// Accumulator registers per thread of the first Triton entry of an Inductor key, 0 if none.
int first_kernel_registers(const nlohmann::json& entries) {
    for (const auto& e : entries) {
        if (e.contains("BLOCK_M")) {
            return e.at("BLOCK_M").get<int>() * e.at("BLOCK_N").get<int>() / (32 * e.at("num_warps").get<int>());
        }
    }
    return 0;
}

// --compile-margin 0 changes nothing; a margin that covers every config puts one with the
// fewest accumulator registers of the space first (the example model ranks ATen first at
// K = 768, so the tables hold two entries: ATen and the first kernel config); at K = 128,
// where every tile compiles fast, nothing moves.
TEST_F(ExportLutCli, CompileMarginPutsFewerRegistersFirst) {
    const std::vector<std::string> base{"--shapeset", shapeset_with_k(*dir, 768), "--top-k", "2", "--no-prune"};
    auto with = [&](const std::string& name, const std::vector<std::string>& extra) {
        return export_table(name, base, extra);
    };
    const auto plain = with("plain.json", {});
    const auto zero = with("zero.json", {"--compile-margin", "0"});
    ASSERT_EQ(zero.result.exit_code, 0) << zero.result.err;
    EXPECT_EQ(zero.table, plain.table);
    EXPECT_NE(zero.result.out.find("put first on 0 problems"), std::string::npos) << zero.result.out;
    const auto wide = with("wide.json", {"--compile-margin", "1e9"});
    ASSERT_EQ(wide.result.exit_code, 0) << wide.result.err;
    ASSERT_EQ(wide.table.size(), plain.table.size());
    EXPECT_NE(wide.table, plain.table);  // the example model's picks are not its lightest tiles
    for (const auto& [key, entries] : wide.table.items()) {
        ASSERT_GT(first_kernel_registers(entries), 0) << key;
        EXPECT_LE(first_kernel_registers(entries), first_kernel_registers(plain.table.at(key))) << key;
    }

    const std::vector<std::string> short_k{"--shapeset", example_shapeset(), "--top-k", "2", "--no-prune"};
    const auto short_wide = export_table("short_wide.json", short_k, {"--compile-margin", "1e9"});
    ASSERT_EQ(short_wide.result.exit_code, 0) << short_wide.result.err;
    EXPECT_EQ(short_wide.table, export_table("short_plain.json", short_k).table);
}

// --aten-alone-from 0 leaves ATen alone wherever it is predicted faster than the kernel pick.
TEST_F(ExportLutCli, AtenAloneFromLeavesAtenAlone) {
    const std::vector<std::string> base{"--shapeset", example_shapeset(), "--top-k", "1", "--no-prune"};
    auto with = [&](const std::string& name, const std::vector<std::string>& extra) {
        return export_table(name, base, extra);
    };
    const auto paired = with("paired.json", {"--with-aten", "--aten-from", "0"});
    const auto alone = with("alone.json", {"--with-aten", "--aten-from", "0", "--aten-alone-from", "0"});
    ASSERT_EQ(alone.result.exit_code, 0) << alone.result.err;
    for (const auto& [key, entries] : alone.table.items()) {
        const auto& both = paired.table.at(key);
        // Paired where the kernel pick ranks first, ATen alone where ATen does.
        if (both.front().contains("BLOCK_M")) {
            EXPECT_EQ(entries, both) << key;
        } else {
            EXPECT_EQ(aten_entries(entries), entries.size()) << key;
        }
    }
}

// --paired-compile-margin widens the margin of a pair's kernel: every pair's kernel has at
// most the registers of the plain pair's (tables that are not pairs: InductorLut tests).
TEST_F(ExportLutCli, PairedCompileMarginLightensPairsOnly) {
    const std::vector<std::string> base{"--shapeset", shapeset_with_k(*dir, 768), "--top-k", "1", "--no-prune",
                                        "--with-aten"};
    auto with = [&](const std::string& name, const std::vector<std::string>& extra) {
        return export_table(name, base, extra);
    };
    const std::vector<std::string> rule{"--aten-within", "1e9"};  // pairs every problem
    const auto plain = with("plain.json", rule);
    auto wide_args = rule;
    wide_args.insert(wide_args.end(), {"--paired-compile-margin", "1e9"});
    const auto wide = with("wide.json", wide_args);
    ASSERT_EQ(wide.result.exit_code, 0) << wide.result.err;
    EXPECT_NE(wide.result.out.find("a lighter kernel in the pair with ATen on "), std::string::npos) << wide.result.out;
    ASSERT_EQ(wide.table.size(), plain.table.size());
    for (const auto& [key, entries] : plain.table.items()) {
        ASSERT_GT(aten_entries(entries), 0u) << key;
        ASSERT_LT(aten_entries(entries), entries.size()) << key;
        EXPECT_LE(first_kernel_registers(wide.table.at(key)), first_kernel_registers(entries)) << key;
    }
    EXPECT_NE(wide.table, plain.table);

    // Without a pairing rule every top-1 table is a pair: the paired margin is the margin.
    const auto always = with("always.json", {"--paired-compile-margin", "1e9"});
    const auto margin = with("margin.json", {"--compile-margin", "1e9"});
    ASSERT_EQ(always.result.exit_code, 0) << always.result.err;
    EXPECT_EQ(always.table, margin.table);
}

// --runner-up-within: a pair gains one kernel config after its pick, the pair's own entries
// kept in order (tables that are not pairs: InductorLut tests).
TEST_F(ExportLutCli, RunnerUpWithinAddsAKernelAfterThePick) {
    const std::vector<std::string> base{"--shapeset", shapeset_with_k(*dir, 4096), "--top-k", "1", "--no-prune",
                                        "--with-aten", "--aten-within", "1e9"};  // pairs every problem
    const auto plain = export_table("plain.json", base, {});
    const auto wide = export_table("wide.json", base, {"--runner-up-within", "1e9"});
    const auto none = export_table("none.json", base, {"--runner-up-within", "0"});
    ASSERT_EQ(wide.result.exit_code, 0) << wide.result.err;
    ASSERT_EQ(wide.table.size(), plain.table.size());
    std::size_t pairs = 0;
    for (const auto& [key, entries] : plain.table.items()) {
        const auto& widened = wide.table.at(key);
        ASSERT_GT(aten_entries(entries), 0u) << key;
        ASSERT_LT(aten_entries(entries), entries.size()) << key;
        ++pairs;
        ASSERT_EQ(widened.size(), entries.size() + 1) << key;  // any kernel is within 1e9 %
        EXPECT_EQ(aten_entries(widened), aten_entries(entries)) << key;
        nlohmann::json without_added = nlohmann::json::array();
        bool skipped = false;
        for (std::size_t i = 0; i < widened.size(); ++i) {
            // The added kernel follows the pick: the first kernel entry after a kernel entry.
            if (!skipped && i > 0 && widened[i].contains("BLOCK_M") && widened[i - 1].contains("BLOCK_M")) {
                skipped = true;
                continue;
            }
            without_added.push_back(widened[i]);
        }
        EXPECT_EQ(without_added, entries) << key;
    }
    EXPECT_EQ(pairs, plain.table.size());
    EXPECT_NE(wide.result.out.find("--runner-up-within 1e+09: a second kernel config beside the pair on "),
              std::string::npos)
        << wide.result.out;
    // A margin of 0 adds only exact ties, which the tiny model does not predict.
    EXPECT_EQ(none.table, plain.table);

    // Without a pairing rule every --with-aten top-1 table is a pair: each gains the same.
    const std::vector<std::string> always{"--shapeset", shapeset_with_k(*dir, 4096), "--top-k", "1", "--no-prune",
                                          "--with-aten", "--runner-up-within", "1e9"};
    const auto without_rule = export_table("always.json", always);
    ASSERT_EQ(without_rule.result.exit_code, 0) << without_rule.result.err;
    EXPECT_EQ(without_rule.table, wide.table);
}

// Slow compiles: the transformer shapes' large mm GEMMs (M >= 2048) with K set to 1030 (no multiple of 8), where
// the shipped model picks 128x128 tiles on 4 warps (duplicates left out). Otherwise the shapes
// whose K lies outside (256, 2048]. Written into `dir`.
std::string transformer_shapes_by_k(const fs::path& dir, bool slow_compile) {
    auto shapeset = nlohmann::json::parse(slurp(std::string(MMT_SOURCE_DIR) + "/data/shapesets/transformer_shapes.json"));
    for (auto& [op, entry] : shapeset.at("operations").items()) {
        auto kept = nlohmann::json::array();
        std::set<std::string> seen;
        for (auto shape : entry.at("shapes")) {
            const auto k = shape.at("K").get<std::int64_t>();
            if (!slow_compile) {
                if (k <= 256 || k > 2048) kept.push_back(shape);
                continue;
            }
            if (op != "mm" || shape.at("M").get<std::int64_t>() < 2048) continue;
            // A K that is no multiple of 8: there the shipped model predicts heavy Triton tiles
            // faster than ATen, as the timings have it; aligned large GEMMs it leaves to ATen.
            shape["K"] = 1030;
            if (seen.insert(shape.dump()).second) kept.push_back(shape);
        }
        entry["shapes"] = kept;
    }
    const auto path = dir / (slow_compile ? "transformer_slow_k.json" : "transformer_other_k.json");
    std::ofstream(path) << shapeset.dump();
    return path.string();
}

// --heavy-pick-alone: where K compiles slowly, a pair whose kernel pick is heavy (128 or more
// accumulator registers) and predicted faster loses its ATen entries; every other table stays.
TEST_F(ExportLutCli, HeavyPickAloneDropsAtenOnlyBesideHeavyPicks) {
    for (const bool slow_compile : {true, false}) {
        std::vector<std::string> args{"--shapeset", transformer_shapes_by_k(*dir, slow_compile), "--top-k", "1",
                                      "--with-aten", "--aten-from", "0"};  // pairs every problem
        const std::string name = slow_compile ? "slow" : "other";
        const auto paired = export_with_shipped_model(name + "_paired.json", args);
        args.insert(args.end(), {"--heavy-pick-alone", "0"});
        const auto alone = export_with_shipped_model(name + "_alone.json", args);
        ASSERT_EQ(paired.result.exit_code, 0) << paired.result.err;
        ASSERT_EQ(alone.result.exit_code, 0) << alone.result.err;
        ASSERT_EQ(alone.table.size(), paired.table.size());
        std::size_t changed = 0;
        for (const auto& [key, entries] : paired.table.items()) {
            const auto& after = alone.table.at(key);
            if (after == entries) continue;
            ++changed;
            ASSERT_EQ(after.size(), 1u) << key;
            ASSERT_TRUE(entries.front().contains("BLOCK_M")) << key;  // the kernel was predicted faster
            EXPECT_EQ(after.front(), entries.front()) << key;
            const auto& pick = after.front();
            EXPECT_GE(pick["BLOCK_M"].get<int>() * pick["BLOCK_N"].get<int>() / (32 * pick["num_warps"].get<int>()), 128)
                << key;
        }
        // The shipped model picks 128x128 tiles on 4 warps for some of these large GEMMs.
        if (slow_compile) EXPECT_GT(changed, 0u);
        if (!slow_compile) EXPECT_EQ(changed, 0u);
        EXPECT_NE(alone.result.out.find("--heavy-pick-alone 0: a heavy kernel pick alone instead of beside ATen on " +
                                        std::to_string(changed) + " problems\n"),
                  std::string::npos)
            << alone.result.out;
    }
}

// --score: a table that offers every measured config (and ATen) gets the best time on every
// problem; a top-1 table at most that.
TEST_F(ExportLutCli, ScoreRatesTablesOnTheDatasetsTimes) {
    const auto every = export_table("every.json", {"--dataset", sample_dataset(), "--top-k", "1000", "--with-aten",
                                                   "--score"});
    ASSERT_EQ(every.result.exit_code, 0) << every.result.err;
    EXPECT_NE(every.result.out.find("5 problems, geomean 1.0000, median 1.0000, 5th percentile 1.000, worst 1.000, "
                                    "0 under 0.85; 5 tables of two or more entries"),
              std::string::npos)
        << every.result.out;
    // The problems listed as losing most: here none loses anything.
    const auto listed = every.result.out.find("the problems that lose most (best / the table's):\n");
    ASSERT_NE(listed, std::string::npos) << every.result.out;
    std::istringstream lines(every.result.out.substr(listed));
    std::string line;
    std::getline(lines, line);
    int problems = 0;
    while (std::getline(lines, line) && line.rfind("  ", 0) == 0) {
        EXPECT_EQ(line.rfind("  1.000  ", 0), 0u) << line;
        EXPECT_NE(line.find(": table ["), std::string::npos) << line;
        ++problems;
    }
    EXPECT_EQ(problems, 5);
    const auto top1 = export_table("top1.json", {"--dataset", sample_dataset(), "--top-k", "1", "--score"});
    ASSERT_EQ(top1.result.exit_code, 0) << top1.result.err;
    const auto at = top1.result.out.find("5 problems, geomean ");
    ASSERT_NE(at, std::string::npos) << top1.result.out;
    const double geomean = std::stod(top1.result.out.substr(at + 20));
    EXPECT_GT(geomean, 0.0);
    EXPECT_LE(geomean, 1.0);
    EXPECT_NE(top1.result.out.find("0 tables of two or more entries (autotuned), 1.00 entries per table"),
              std::string::npos)
        << top1.result.out;
    // A top-2 table holds the top-1 table's pick, and ATen, which Inductor adds to every
    // table of several configs: never worse.
    const auto top2 = export_table("top2.json", {"--dataset", sample_dataset(), "--top-k", "2", "--score"});
    const auto at2 = top2.result.out.find("5 problems, geomean ");
    ASSERT_NE(at2, std::string::npos) << top2.result.out;
    EXPECT_GE(std::stod(top2.result.out.substr(at2 + 20)), geomean);
    // The first problem listed is the worst.
    const auto worst_at = top1.result.out.find("worst ");
    const auto first_at = top1.result.out.find("(best / the table's):\n  ");
    ASSERT_NE(worst_at, std::string::npos);
    ASSERT_NE(first_at, std::string::npos);
    EXPECT_EQ(top1.result.out.substr(worst_at + 6, 5), top1.result.out.substr(first_at + 24, 5)) << top1.result.out;
    EXPECT_NE(top2.result.out.find("5 tables of two or more entries"), std::string::npos) << top2.result.out;
}

// --aten-alone-gemv: where M = 1 and the model ranks ATen first, ATen alone; every other
// table stays the pair a --with-aten top-1 table is.
TEST_F(ExportLutCli, AtenAloneGemvLeavesAtenAloneWhereRankedFirst) {
    // The shipped model ranks ATen first on these GEMVs where K = 2048, a kernel where K = 128.
    const std::vector<std::string> base{"--shapeset", shapeset_with_ks(*dir, {128, 2048}, 1), "--top-k", "1", "--no-prune"};
    auto with = [&](const std::string& name, std::vector<std::string> extra) {
        extra.insert(extra.begin(), base.begin(), base.end());
        return export_with_shipped_model(name, extra);
    };
    const auto first = with("first.json", {});
    const auto paired = with("paired.json", {"--with-aten"});
    const auto gemv = with("gemv.json", {"--with-aten", "--aten-alone-gemv"});
    ASSERT_EQ(gemv.result.exit_code, 0) << gemv.result.err;
    std::size_t alone = 0, kept = 0;
    for (const auto& [key, entries] : gemv.table.items()) {
        if (aten_entries(first.table.at(key)) > 0) {  // the model's top-1 is ATen
            EXPECT_EQ(aten_entries(entries), entries.size()) << key;
            ++alone;
        } else {
            EXPECT_EQ(entries, paired.table.at(key)) << key;
            ++kept;
        }
    }
    EXPECT_GT(alone, 0u) << first.result.out;
    EXPECT_GT(kept, 0u) << first.result.out;
    EXPECT_NE(gemv.result.out.find("--aten-alone-gemv: ATen alone on " + std::to_string(alone) + " GEMVs"),
              std::string::npos)
        << gemv.result.out;

    // Problems with more than one row keep their pairs.
    const std::vector<std::string> rows{"--shapeset", shapeset_with_k(*dir, 2048), "--top-k", "1", "--no-prune", "--with-aten"};
    EXPECT_EQ(export_table("rows_gemv.json", rows, {"--aten-alone-gemv"}).table, export_table("rows.json", rows).table);
}

// The key pad_mm's padded problem is looked up under gets the configs ranked for that
// problem (aligned rows), the same as a shapeset that holds the padded shape itself.
TEST_F(ExportLutCli, APaddedFormIsRankedAsThePaddedProblem) {
    const std::vector<std::string> rules{"--top-k", "1", "--no-prune", "--with-aten", "--aten-from", "15",
                                         "--compile-margin", "5"};
    auto misaligned_args = rules, padded_args = rules;
    misaligned_args.insert(misaligned_args.begin(), {"--shapeset", shapeset_with_k(*dir, 390)});  // float32: pads to 392
    padded_args.insert(padded_args.begin(), {"--shapeset", shapeset_with_k(*dir, 392)});
    const auto misaligned = export_table("k390.json", misaligned_args);
    const auto padded = export_table("k392.json", padded_args);
    ASSERT_EQ(misaligned.result.exit_code, 0) << misaligned.result.err;
    ASSERT_EQ(padded.result.exit_code, 0) << padded.result.err;
    std::size_t shared = 0;
    for (const auto& [key, entries] : padded.table.items()) {
        if (!misaligned.table.contains(key)) continue;  // a transposed layout's own key
        EXPECT_EQ(misaligned.table.at(key), entries) << key;
        ++shared;
    }
    EXPECT_GT(shared, 0u) << misaligned.table.dump(1).substr(0, 600);
}

// From a dataset the padded form ranks the problem's measured configs for the padded
// shape, EVEN_K set for its K: the sample dataset with every K two short (float32 rows
// misaligned, padded back to the original K) gives the original dataset's tables there.
TEST_F(ExportLutCli, APaddedFormOfADatasetProblemRanksItsConfigsForThePaddedShape) {
    auto shortened = nlohmann::json::parse(slurp(sample_dataset()));
    for (auto& [hardware, entry] : shortened.at("hardware").items()) {
        for (auto& [op, operation] : entry.at("operation").items()) {
            nlohmann::json solutions = nlohmann::json::object();
            for (auto& [key, solution] : operation.at("solution").items()) {
                auto shape = nlohmann::json::parse(key);
                shape["K"] = shape["K"].get<std::int64_t>() - 2;
                for (auto& timed : solution.at("timed_configs")) timed["config"]["EVEN_K"] = false;
                solutions[shape.dump()] = solution;
            }
            operation["solution"] = solutions;
        }
    }
    const auto path = *dir / "shortened.json";
    std::ofstream(path) << shortened.dump();
    const std::vector<std::string> args{"--top-k", "2"};
    const auto original = export_table("original.json", {"--dataset", sample_dataset()}, args);
    const auto padded = export_table("shortened_lut.json", {"--dataset", path.string()}, args);
    ASSERT_EQ(original.result.exit_code, 0) << original.result.err;
    ASSERT_EQ(padded.result.exit_code, 0) << padded.result.err;
    ASSERT_EQ(original.table.size(), 5u);
    for (const auto& [key, entries] : original.table.items()) {
        ASSERT_TRUE(padded.table.contains(key)) << key;
        EXPECT_EQ(padded.table.at(key), entries) << key;
    }
}

/// Whether an Inductor key is an addmm's.
bool is_addmm_key(const std::string& key) { return key.find("+alpha=1&beta=1+addmm") != std::string::npos; }

// --policy graph: every table one entry, a kernel config or ATen alone, and an addmm's ATen
// entry aten::bias_addmm alone (the shipped model leaves the large aligned GEMMs to ATen).
TEST_F(ExportLutCli, PolicyGraphWritesSingleEntryTables) {
    const std::string shapes = std::string(MMT_SOURCE_DIR) + "/data/shapesets/transformer_shapes.json";
    const auto graph = export_with_shipped_model("graph.json", {"--shapeset", shapes, "--policy", "graph"});
    ASSERT_EQ(graph.result.exit_code, 0) << graph.result.err;
    std::size_t kernels = 0, aten = 0, addmm_aten = 0;
    for (const auto& [key, entries] : graph.table.items()) {
        ASSERT_EQ(entries.size(), 1u) << key << " " << entries.dump();
        const auto id = entries.front().at("template_id").get<std::string>();
        EXPECT_NE(id, "aten::addmm") << key;
        if (id.rfind("aten::", 0) != 0) {
            ++kernels;
            continue;
        }
        ++aten;
        if (is_addmm_key(key)) {
            EXPECT_EQ(entries.front(), nlohmann::json({{"template_id", "aten::bias_addmm"}})) << key;
            ++addmm_aten;
        }
    }
    EXPECT_GT(kernels, 0u);
    EXPECT_GT(aten, 0u);
    EXPECT_GT(addmm_aten, 0u);
    EXPECT_NE(graph.result.out.find("policy graph: the kernel pick alone on "), std::string::npos) << graph.result.out;
    EXPECT_NE(graph.result.out.find("ATen beside the kernel pick on 0 (kernel margin 10 %)"), std::string::npos)
        << graph.result.out;

    // The tiny model's tables too, from a shapeset and from a dataset.
    for (const auto& input : {std::vector<std::string>{"--shapeset", example_shapeset(), "--no-prune"},
                              std::vector<std::string>{"--dataset", sample_dataset()}}) {
        const auto tiny = export_table("tiny_graph.json", input, {"--policy", "graph"});
        ASSERT_EQ(tiny.result.exit_code, 0) << tiny.result.err;
        ASSERT_FALSE(tiny.table.empty());
        for (const auto& [key, entries] : tiny.table.items()) {
            ASSERT_EQ(entries.size(), 1u) << key << " " << entries.dump();
            EXPECT_NE(entries.front().at("template_id"), "aten::addmm") << key;
        }
    }
}

// Without --policy, --top-k or a rule flag the default policy (graph) applies: the same bytes.
TEST_F(ExportLutCli, NoFlagsIsPolicyGraph) {
    for (const auto& input : {std::vector<std::string>{"--shapeset", example_shapeset(), "--no-prune"},
                              std::vector<std::string>{"--dataset", sample_dataset()}}) {
        const auto plain = export_table("default.json", input);
        ASSERT_EQ(plain.result.exit_code, 0) << plain.result.err;
        const std::string plain_bytes = slurp(*dir / "default.json");
        const auto graph = export_table("policy_graph.json", input, {"--policy", "graph"});
        ASSERT_EQ(graph.result.exit_code, 0) << graph.result.err;
        EXPECT_EQ(slurp(*dir / "policy_graph.json"), plain_bytes) << input[0];
        EXPECT_NE(plain.result.out.find("policy graph: "), std::string::npos) << plain.result.out;
    }
}

// --policy isolated is the recommended eight flags: the same bytes, the same score.
TEST_F(ExportLutCli, PolicyIsolatedIsTheEightFlags) {
    const std::vector<std::string> eight{"--top-k", "1", "--with-aten", "--aten-from", "10", "--compile-margin", "5",
                                         "--aten-alone-from", "100", "--aten-alone-gemv", "--runner-up-within", "5",
                                         "--heavy-pick-alone", "5"};
    const std::string shapes = std::string(MMT_SOURCE_DIR) + "/data/shapesets/transformer_shapes.json";
    auto flag_args = eight;
    flag_args.insert(flag_args.begin(), {"--shapeset", shapes});
    const auto flags = export_with_shipped_model("eight_flags.json", flag_args);
    const auto isolated = export_with_shipped_model("isolated.json", {"--shapeset", shapes, "--policy", "isolated"});
    ASSERT_EQ(flags.result.exit_code, 0) << flags.result.err;
    ASSERT_EQ(isolated.result.exit_code, 0) << isolated.result.err;
    EXPECT_EQ(slurp(*dir / "isolated.json"), slurp(*dir / "eight_flags.json"));
    EXPECT_NE(isolated.result.out.find("policy isolated: "), std::string::npos) << isolated.result.out;

    const std::vector<std::string> dataset{"--dataset", sample_dataset(), "--score"};
    const auto tiny_flags = export_table("tiny_eight_flags.json", dataset, eight);
    const auto tiny_isolated = export_table("tiny_isolated.json", dataset, {"--policy", "isolated"});
    ASSERT_EQ(tiny_flags.result.exit_code, 0) << tiny_flags.result.err;
    ASSERT_EQ(tiny_isolated.result.exit_code, 0) << tiny_isolated.result.err;
    EXPECT_EQ(slurp(*dir / "tiny_isolated.json"), slurp(*dir / "tiny_eight_flags.json"));
    const auto score_of = [](const std::string& out) { return out.substr(out.find("score on the dataset's times")); };
    EXPECT_EQ(score_of(tiny_isolated.result.out), score_of(tiny_flags.result.out));
}

// A torch-diode Table takes a policy's top-k (1) alone.
TEST_F(ExportLutCli, ADiodeTableTakesThePolicysTopK) {
    const auto [result, table] =
        export_table("graph_diode.json", {"--dataset", sample_dataset(), "--lut-format", "diode", "--policy", "graph"});
    ASSERT_EQ(result.exit_code, 0) << result.err;
    const auto& solutions = table.at("hardware").at("AMD EPYC").at("operation").at("mm").at("solution");
    for (const auto& [shape, solution] : solutions.items()) {
        EXPECT_EQ(solution.at("config").size(), 1u) << shape;
    }
}

// --policy sets --top-k and every rule: giving one of them too is an error, as is an unknown name.
TEST_F(ExportLutCli, PolicyWithTopKOrARuleFlagIsOneErrorLine) {
    const auto out = (*dir / "policy_bad.json").string();
    const std::vector<std::string> base{"--shapeset", example_shapeset(), "--output", out};
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
        {{"--policy", "graph", "--top-k", "1"},
         "error: --policy: cannot be combined with --top-k (a policy sets it)\n"},
        {{"--policy", "isolated", "--with-aten"},
         "error: --policy: cannot be combined with --with-aten (a policy sets it)\n"},
        {{"--policy", "graph", "--aten-within", "5"},
         "error: --policy: cannot be combined with --aten-within (a policy sets it)\n"},
        {{"--policy", "graph", "--aten-from", "10"},
         "error: --policy: cannot be combined with --aten-from (a policy sets it)\n"},
        {{"--policy", "graph", "--aten-alone-from", "100"},
         "error: --policy: cannot be combined with --aten-alone-from (a policy sets it)\n"},
        {{"--policy", "graph", "--aten-alone-gemv"},
         "error: --policy: cannot be combined with --aten-alone-gemv (a policy sets it)\n"},
        {{"--policy", "graph", "--compile-margin", "5"},
         "error: --policy: cannot be combined with --compile-margin (a policy sets it)\n"},
        {{"--policy", "graph", "--paired-compile-margin", "15"},
         "error: --policy: cannot be combined with --paired-compile-margin (a policy sets it)\n"},
        {{"--policy", "graph", "--runner-up-within", "5"},
         "error: --policy: cannot be combined with --runner-up-within (a policy sets it)\n"},
        {{"--policy", "graph", "--heavy-pick-alone", "5"},
         "error: --policy: cannot be combined with --heavy-pick-alone (a policy sets it)\n"},
        {{"--policy", "fast"},
         "error: --policy: unknown policy 'fast' (expected one of graph, graph-both-addmm, isolated)\n"},
    };
    for (const auto& [extra, message] : cases) {
        auto args = base;
        args.insert(args.end(), extra.begin(), extra.end());
        const auto result = run(args);
        EXPECT_EQ(result.exit_code, 2) << extra.back();
        EXPECT_EQ(result.err, message);
    }
    EXPECT_FALSE(fs::exists(out));
}

TEST_F(ExportLutCli, BadInputGivesOneErrorLineAndExitTwo) {
    std::ofstream(*dir / "empty.json") << R"({"operations": {}})";
    const auto out = (*dir / "bad.json").string();
    const std::vector<std::vector<std::string>> cases{
        {"--shapeset", example_shapeset(), "--dataset", sample_dataset(), "--top-k", "1", "--output", out},
        {"--top-k", "1", "--output", out},
        {"--shapeset", (*dir / "empty.json").string(), "--top-k", "1", "--output", out},
        {"--shapeset", example_shapeset(), "--top-k", "0", "--output", out},
        {"--shapeset", example_shapeset(), "--output", out, "--with-aten"},  // a rule flag without --top-k
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--lut-format", "csv"},
        {"--dataset", sample_dataset(), "--top-k", "1", "--output", out, "--op-name", "bmm_tt"},
        {"--dataset", sample_dataset(), "--top-k", "1", "--output", out, "--lut-format", "diode", "--with-aten"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--aten-within", "10"},
        {"--shapeset", example_shapeset(), "--top-k", "2", "--output", out, "--with-aten", "--aten-within", "10"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--with-aten", "--aten-within", "-1"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--with-aten", "--aten-within", "ten"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--aten-from", "20"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--with-aten", "--aten-from", "-1"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--aten-alone-from", "20"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--with-aten", "--aten-alone-from", "x"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--compile-margin", "-5"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--paired-compile-margin", "15"},
        {"--shapeset", example_shapeset(), "--top-k", "2", "--output", out, "--with-aten", "--paired-compile-margin", "15"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--with-aten", "--paired-compile-margin", "-1"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--with-aten", "--paired-compile-margin", "15",
         "--compile-margin", "5"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--aten-alone-gemv"},
        {"--shapeset", example_shapeset(), "--top-k", "3", "--output", out, "--with-aten", "--aten-alone-gemv"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--runner-up-within", "5"},
        {"--shapeset", example_shapeset(), "--top-k", "2", "--output", out, "--with-aten", "--runner-up-within", "5"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--with-aten", "--runner-up-within", "-5"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--with-aten", "--heavy-pick-alone", "5"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--with-aten", "--aten-from", "10",
         "--heavy-pick-alone", "-5"},
        {"--shapeset", example_shapeset(), "--top-k", "1", "--output", out, "--score"},
        {"--dataset", sample_dataset(), "--top-k", "1", "--output", out, "--lut-format", "diode", "--score"},
    };
    for (const auto& args : cases) {
        const auto result = run(args);
        EXPECT_EQ(result.exit_code, 2) << args[0] << ": " << result.err;
        EXPECT_NE(result.err.find("error: "), std::string::npos) << result.err;
    }
    EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace mmt::testing
