// Problem generators: every flag honoured, reproducible with the seed, bad options rejected.

#include "matmul_toolkit/collect/problem_generator.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"

namespace mmt::collect {
namespace {

GeneratorOptions small_options(int num_shapes = 50) {
    GeneratorOptions o;
    o.num_shapes = num_shapes;
    o.sizes.min_size = 16;
    o.sizes.max_size = 300;
    return o;
}

bool is_power_of_two(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

std::vector<std::int64_t> all_dims(const std::vector<Problem>& problems) {
    std::vector<std::int64_t> dims;
    for (const auto& p : problems) {
        dims.push_back(p.shape.M);
        dims.push_back(p.shape.N);
        dims.push_back(p.shape.K);
    }
    return dims;
}

std::string subject_of(const GeneratorOptions& o) {
    try {
        validate_generator_options(o);
    } catch (const core::InputError& e) {
        return e.subject();
    }
    return "(accepted)";
}

TEST(GenerateProblems, TheSameSeedGivesTheSameListAndAnotherSeedAnother) {
    const auto o = small_options();
    const auto a = generate_problems(o, 42);
    const auto b = generate_problems(o, 42);
    const auto c = generate_problems(o, 43);
    ASSERT_EQ(a.size(), 50u);
    for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].op_key(), b[i].op_key());
        EXPECT_EQ(a[i].shape, b[i].shape);
    }
    std::size_t same = 0;
    for (std::size_t i = 0; i < a.size(); ++i) same += a[i].shape == c[i].shape;
    EXPECT_LT(same, 5u);
}

TEST(GenerateProblems, AShorterRunDrawsAPrefixOfALongerOne) {
    // What lets `collect --num-shapes 5` resume a killed `--num-shapes 3` run's file.
    const auto three = generate_problems(small_options(3), 42);
    const auto five = generate_problems(small_options(5), 42);
    for (std::size_t i = 0; i < three.size(); ++i) EXPECT_EQ(three[i].shape, five[i].shape);
}

TEST(GenerateProblems, UniformSizesStayInRangeAndProblemsAreDistinct) {
    auto o = small_options(200);
    const auto problems = generate_problems(o, 1);
    for (auto d : all_dims(problems)) {
        EXPECT_GE(d, 16);
        EXPECT_LE(d, 300);
    }
    std::set<std::string> keys;
    for (const auto& p : problems) keys.insert(p.op_key() + core::shape_key(p.shape));
    EXPECT_EQ(keys.size(), problems.size());
}

TEST(GenerateProblems, PowerOfTwoGivesOnlyPowersOfTwoInRange) {
    auto o = small_options(30);
    o.sizes.min_size = 20;  // first power of two: 32
    o.sizes.max_size = 1000;  // last: 512
    o.sizes.power_of_two = true;
    for (auto d : all_dims(generate_problems(o, 5))) {
        EXPECT_TRUE(is_power_of_two(d)) << d;
        EXPECT_GE(d, 32);
        EXPECT_LE(d, 512);
    }
}

TEST(GenerateProblems, NoRectangularGivesSquareProblems) {
    auto o = small_options(20);
    o.sizes.no_rectangular = true;
    for (const auto& p : generate_problems(o, 9)) {
        EXPECT_EQ(p.shape.M, p.shape.N);
        EXPECT_EQ(p.shape.N, p.shape.K);
    }
}

TEST(GenerateProblems, NoOddSizesGivesEvenSizesUniformAndLogNormal) {
    auto o = small_options(40);
    o.sizes.min_size = 15;
    o.sizes.max_size = 301;
    o.sizes.no_odd_sizes = true;
    for (auto d : all_dims(generate_problems(o, 2))) {
        EXPECT_EQ(d % 2, 0) << d;
        EXPECT_GE(d, 16);
        EXPECT_LE(d, 300);
    }
    o.sizes.log_normal = true;
    for (auto d : all_dims(generate_problems(o, 2))) EXPECT_EQ(d % 2, 0) << d;
}

TEST(GenerateProblems, MultipleOfRoundsNAndKToTheNearestMultipleAndLeavesM) {
    auto o = small_options(60);
    o.sizes.min_size = 1;
    o.sizes.max_size = 4096;
    o.sizes.log_normal = true;
    o.sizes.multiple_of = 64;
    const auto problems = generate_problems(o, 5);
    bool m_off_the_grid = false;
    for (const auto& p : problems) {
        EXPECT_EQ(p.shape.N % 64, 0) << p.shape.N;
        EXPECT_EQ(p.shape.K % 64, 0) << p.shape.K;
        EXPECT_GE(p.shape.N, 64);
        EXPECT_LE(p.shape.K, 4096);
        m_off_the_grid |= p.shape.M % 64 != 0;
    }
    EXPECT_TRUE(m_off_the_grid);

    // The nearest multiple, within the range: exp(mean) with no spread gives known draws.
    GeneratorOptions one;
    one.num_shapes = 1;
    one.sizes.min_size = 100;
    one.sizes.max_size = 1000;
    one.sizes.log_normal = true;
    one.sizes.multiple_of = 64;
    one.sizes.m = {std::log(150.5), 0.0};
    one.sizes.n = {std::log(150.5), 0.0};  // 150: 128 is nearer than 192
    one.sizes.k = {std::log(999.5), 0.0};  // 999: 1024 is out of range, 960 is the last multiple
    auto p = generate_problems(one, 3).front();
    EXPECT_EQ(p.shape.M, 150);
    EXPECT_EQ(p.shape.N, 128);
    EXPECT_EQ(p.shape.K, 960);
    one.sizes.n = {std::log(101.5), 0.0};  // 101: 64 lies below --min-size, 128 is the first multiple
    EXPECT_EQ(generate_problems(one, 3).front().shape.N, 128);
    one.sizes.no_rectangular = true;  // square problems stay square
    p = generate_problems(one, 3).front();
    EXPECT_EQ(p.shape.M, 128);
    EXPECT_EQ(p.shape.N, 128);
    EXPECT_EQ(p.shape.K, 128);
}

TEST(GenerateProblems, WithoutOddSizesFlagOddSizesDoAppear) {
    const auto dims = all_dims(generate_problems(small_options(40), 2));
    EXPECT_TRUE(std::any_of(dims.begin(), dims.end(), [](std::int64_t d) { return d % 2 == 1; }));
}

TEST(GenerateProblems, LogNormalWithZeroStdGivesExpOfTheMeanPerDimension) {
    GeneratorOptions o;
    o.num_shapes = 1;
    o.sizes.min_size = 1;
    o.sizes.max_size = 100000;
    o.sizes.log_normal = true;
    o.sizes.m = {std::log(100.5), 0.0};  // floor(100.5)
    o.sizes.n = {std::log(2000.5), 0.0};
    o.sizes.k = {std::log(30.5), 0.0};
    const auto p = generate_problems(o, 4).front();
    EXPECT_EQ(p.shape.M, 100);
    EXPECT_EQ(p.shape.N, 2000);
    EXPECT_EQ(p.shape.K, 30);
}

TEST(GenerateProblems, LogNormalSizesAreClampedToTheRange) {
    GeneratorOptions o;
    o.num_shapes = 1;
    o.sizes.min_size = 64;
    o.sizes.max_size = 512;
    o.sizes.log_normal = true;
    o.sizes.m = {20.0, 0.0};  // e^20 -> max
    o.sizes.n = {0.0, 0.0};   // 1 -> min
    o.sizes.k = {std::log(300.5), 0.0};
    const auto p = generate_problems(o, 4).front();
    EXPECT_EQ(p.shape.M, 512);
    EXPECT_EQ(p.shape.N, 64);
    EXPECT_EQ(p.shape.K, 300);
}

TEST(GenerateProblems, LogNormalDefaultsFollowTorchDiodesFit) {
    // The median of lognormal(mu, sigma) is e^mu: 715 for M's default mu = 6.5725.
    GeneratorOptions o;
    o.num_shapes = 1500;
    o.sizes.min_size = 1;
    o.sizes.max_size = 1 << 20;
    o.sizes.log_normal = true;
    o.ops = {"mm"};
    std::vector<double> m;
    for (const auto& p : generate_problems(o, 42)) m.push_back(static_cast<double>(p.shape.M));
    std::nth_element(m.begin(), m.begin() + m.size() / 2, m.end());
    EXPECT_GT(m[m.size() / 2], 600.0);
    EXPECT_LT(m[m.size() / 2], 850.0);
}

TEST(GenerateProblems, OpsDtypesLayoutsAndBatchSizesComeFromTheLists) {
    auto o = small_options(150);
    o.ops = {"addmm", "bmm"};
    o.dtypes = {"float32", "float16"};
    o.layouts = {"nt", "tt"};
    o.batch_sizes = {3, 5};
    std::set<std::string> ops, dtypes, layouts;
    std::set<std::int64_t> batches;
    for (const auto& p : generate_problems(o, 8)) {
        ops.insert(p.op);
        dtypes.insert(p.dtype());
        layouts.insert(p.layout);
        if (p.op == "bmm") {
            batches.insert(p.shape.B);
        } else {
            EXPECT_EQ(p.shape.B, 1);
        }
        EXPECT_EQ(p.op_key(), p.op + "_" + p.layout);
    }
    EXPECT_EQ(ops, (std::set<std::string>{"addmm", "bmm"}));
    EXPECT_EQ(dtypes, (std::set<std::string>{"float16", "float32"}));
    EXPECT_EQ(layouts, (std::set<std::string>{"nt", "tt"}));
    EXPECT_EQ(batches, (std::set<std::int64_t>{3, 5}));
}

TEST(GenerateProblems, TooFewDistinctProblemsIsAnError) {
    auto o = small_options(10);
    o.sizes.min_size = o.sizes.max_size = 64;  // one size, one op: at most 1 distinct problem
    o.ops = {"mm"};
    try {
        generate_problems(o, 1);
        FAIL() << "10 distinct problems from one";
    } catch (const core::InputError& e) {
        EXPECT_EQ(e.subject(), "--num-shapes");
    }
}

TEST(ValidateGeneratorOptions, NamesTheOffendingOption) {
    auto o = small_options();
    EXPECT_EQ(subject_of(o), "(accepted)");
    o.sizes.min_size = 400;
    EXPECT_EQ(subject_of(o), "--max-size");  // min > max
    o = small_options();
    o.num_shapes = 0;
    EXPECT_EQ(subject_of(o), "--num-shapes");
    o = small_options();
    o.sizes.min_size = 0;
    EXPECT_EQ(subject_of(o), "--min-size");
    o = small_options();
    o.ops = {"mm", "conv"};
    EXPECT_EQ(subject_of(o), "--ops");
    o = small_options();
    o.dtypes = {"float17"};
    EXPECT_EQ(subject_of(o), "--dtypes");
    o = small_options();
    o.layouts = {"nx"};
    EXPECT_EQ(subject_of(o), "--layouts");
    o = small_options();
    o.batch_sizes = {0};
    EXPECT_EQ(subject_of(o), "--batch-sizes");
    o = small_options();
    o.sizes.min_size = 33;
    o.sizes.max_size = 63;
    o.sizes.power_of_two = true;
    EXPECT_EQ(subject_of(o), "--power-of-two");
    o = small_options();
    o.sizes.min_size = o.sizes.max_size = 33;
    o.sizes.no_odd_sizes = true;
    EXPECT_EQ(subject_of(o), "--no-odd-sizes");
    o = small_options();
    o.sizes.multiple_of = 0;
    EXPECT_EQ(subject_of(o), "--multiple-of");
    o.sizes.min_size = 65;
    o.sizes.max_size = 127;
    o.sizes.multiple_of = 64;  // no multiple of 64 in [65, 127]
    EXPECT_EQ(subject_of(o), "--multiple-of");
    o.sizes.max_size = 128;
    EXPECT_EQ(subject_of(o), "(accepted)");
    o = small_options();
    o.sizes.k.std = -1.0;
    EXPECT_EQ(subject_of(o), "--log-normal-k-std");
    o = small_options();
    o.dtypes = {"int8"};
    o.ops = {"mm", "bmm"};  // torch._int_mm is mm only
    EXPECT_EQ(subject_of(o), "--dtypes");
    o.ops = {"mm"};
    EXPECT_EQ(subject_of(o), "(accepted)");
}

// int8 problems take the sizes torch._int_mm runs on CUDA: M > 16, K and N multiples of 8.
TEST(GenerateProblems, Int8SizesAreTorchIntMmSizes) {
    auto o = small_options();
    o.dtypes = {"int8", "float32"};
    o.ops = {"mm"};
    o.num_shapes = 60;
    o.sizes.min_size = 1;
    o.sizes.max_size = 300;
    std::size_t int8 = 0, odd_float = 0;
    for (const auto& p : generate_problems(o, 5)) {
        if (p.dtype() != "int8") {
            odd_float += p.shape.K % 8 != 0;
            continue;
        }
        ++int8;
        EXPECT_GT(p.shape.M, 16);
        EXPECT_EQ(p.shape.N % 8, 0);
        EXPECT_EQ(p.shape.K % 8, 0);
        EXPECT_GT(p.shape.K, 16);
        EXPECT_LE(p.shape.N, 300);
        EXPECT_LE(p.shape.K, 300);
        EXPECT_EQ(p.shape.out_dtype, "int32");
    }
    EXPECT_GT(int8, 10u);
    EXPECT_GT(odd_float, 0u);  // other dtypes keep their drawn sizes
}

TEST(ProblemsFromShapeset, KeepsListedOpsTheirLayoutsAndOptionallyReplacesDtypes) {
    core::OperationShapeSet set;
    set.add_shape("mm", core::make_shape(1, 10, 20, 30, "bfloat16"));
    set.add_shape("mm_nt", core::make_shape(1, 11, 21, 31, "bfloat16"));
    set.add_shape("bmm", core::make_shape(4, 12, 22, 32, "bfloat16"));

    const auto mm_only = problems_from_shapeset(set, {"mm"});
    ASSERT_EQ(mm_only.size(), 2u);
    EXPECT_EQ(mm_only[0].op_key(), "mm");
    EXPECT_EQ(mm_only[1].op_key(), "mm_nt");
    EXPECT_EQ(mm_only[1].layout, "nt");
    EXPECT_EQ(mm_only[1].dtype(), "bfloat16");

    const auto all = problems_from_shapeset(set, {"mm", "addmm", "bmm"}, {"float32", "float16"});
    ASSERT_EQ(all.size(), 6u);
    EXPECT_EQ(all[0].dtype(), "float32");
    EXPECT_EQ(all[1].dtype(), "float16");
    EXPECT_EQ(all[1].shape.out_dtype, "float16");
    EXPECT_EQ(all[5].shape.B, 4);
    EXPECT_THROW(problems_from_shapeset(set, {"gemv"}), core::InputError);
}

TEST(DescribeProblem, NamesOpLayoutSizesAndDtype) {
    EXPECT_EQ(describe_problem(make_problem("mm", "tn", 1, 2, 3, 4, "float32")),
              "mm_tn B=1 M=2 N=3 K=4 float32");
}

}  // namespace
}  // namespace mmt::collect
