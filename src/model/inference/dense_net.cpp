#include "dense_net.hpp"

// 64-byte vectors pass between the inlined helpers below; no function with a vector
// argument or result is visible outside this file, so the ABI note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

#include <algorithm>
#include <cmath>
#include <cstring>

// One function body per instruction set, picked when the program loads (GCC's function
// multi-versioning): the build targets baseline x86-64, the machines running it have AVX2 or
// AVX-512.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define MMT_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MMT_VECTOR_CLONES
#endif

namespace mmt::model {
namespace {

constexpr std::size_t kRowTile = 4;
constexpr std::size_t kColTile = 16;

void fill_bias(const DenseLayer& layer, std::size_t rows, std::vector<float>& y) {
    y.resize(rows * layer.out);
    for (std::size_t r = 0; r < rows; ++r) {
        std::copy(layer.bias.begin(), layer.bias.end(), y.begin() + static_cast<std::ptrdiff_t>(r * layer.out));
    }
}

void relu(float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = std::max(y[i], 0.0f);
}

void apply(const DenseLayer& layer, const float* x, std::size_t rows, std::vector<float>& y) {
    fill_bias(layer, rows, y);
    const std::size_t in = layer.in / layer.groups, out = layer.out / layer.groups;
    for (std::size_t g = 0; g < layer.groups; ++g) {
        accumulate_product(x + g * in, layer.in, rows, in, layer.weight.data() + g * in * out, out,
                           y.data() + g * out, layer.out);
    }
    if (layer.relu) relu(y.data(), rows * layer.out);
}

/// Whether every weight outside the diagonal blocks of a split into `groups` is zero.
bool block_diagonal(const std::vector<float>& weight, std::size_t in, std::size_t out, std::size_t groups) {
    const std::size_t in_group = in / groups, out_group = out / groups;
    for (std::size_t i = 0; i < in; ++i) {
        for (std::size_t o = 0; o < out; ++o) {
            if (i / in_group != o / out_group && weight[i * out + o] != 0.0f) return false;
        }
    }
    return true;
}

}  // namespace

DenseLayer make_dense_layer(std::size_t in, std::size_t out, std::vector<float> weight, std::vector<float> bias,
                            bool relu, bool find_blocks) {
    // Weights that training left subnormal (|w| < FLT_MIN) contribute nothing, but each
    // product with one takes a microcode assist on x86: flushed to zero, they cost nothing.
    for (auto* values : {&weight, &bias}) {
        for (float& v : *values) {
            if (std::fpclassify(v) == FP_SUBNORMAL) v = 0.0f;
        }
    }
    DenseLayer layer;
    layer.in = in;
    layer.out = out;
    layer.bias = std::move(bias);
    layer.relu = relu;
    // Trained weights are never exactly zero by chance: a whole zero block comes from an ensemble.
    for (std::size_t groups = find_blocks ? std::min(in, out) : 1; groups >= 2; --groups) {
        if (in % groups != 0 || out % groups != 0 || !block_diagonal(weight, in, out, groups)) continue;
        const std::size_t in_group = in / groups, out_group = out / groups;
        layer.groups = groups;
        layer.weight.reserve(in_group * out_group * groups);
        for (std::size_t g = 0; g < groups; ++g) {
            for (std::size_t i = 0; i < in_group; ++i) {
                const float* row = weight.data() + (g * in_group + i) * out + g * out_group;
                layer.weight.insert(layer.weight.end(), row, row + out_group);
            }
        }
        return layer;
    }
    layer.weight = std::move(weight);
    return layer;
}

namespace {

// GCC's generic vectors: a 16-lane (64-byte) vector becomes a zmm register with AVX-512, two
// ymm with AVX2 and four xmm otherwise, whichever clone runs. The 8- and 4-lane ones take
// the columns left over after the 16-wide tiles (a width of 40: 2 × 16 + 8).
template <std::size_t kLanes>
struct Lanes {
    typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));
};
using Vec = Lanes<kColTile>::Vec;

template <typename V>
[[gnu::always_inline]] inline V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

template <typename V>
[[gnu::always_inline]] inline void store(float* p, const V& v) { std::memcpy(p, &v, sizeof v); }

/// kRows rows × kVecs · kLanes outputs from column `o`: the accumulators stay in registers
/// while the inputs stream past, so each weight load serves kRows rows. Always inlined, as
/// the helpers below: a copy outside the cloned caller is compiled for baseline x86-64.
template <std::size_t kRows, std::size_t kVecs, std::size_t kLanes>
[[gnu::always_inline]] inline void tile(const float* x, std::size_t x_stride, std::size_t in, const float* weight,
                                        std::size_t out, std::size_t o, float* y, std::size_t y_stride) {
    using V = typename Lanes<kLanes>::Vec;
    V acc[kRows][kVecs];
    for (std::size_t t = 0; t < kRows; ++t) {
        for (std::size_t v = 0; v < kVecs; ++v) acc[t][v] = load<V>(y + t * y_stride + o + v * kLanes);
    }
    for (std::size_t i = 0; i < in; ++i) {
        V w[kVecs];
        for (std::size_t v = 0; v < kVecs; ++v) w[v] = load<V>(weight + i * out + o + v * kLanes);
        for (std::size_t t = 0; t < kRows; ++t) {
            const float xi = x[t * x_stride + i];
            for (std::size_t v = 0; v < kVecs; ++v) acc[t][v] += xi * w[v];
        }
    }
    for (std::size_t t = 0; t < kRows; ++t) {
        for (std::size_t v = 0; v < kVecs; ++v) store(y + t * y_stride + o + v * kLanes, acc[t][v]);
    }
}

/// Every row, columns from `from` on in tiles of kVecs · kLanes, as many as fit; returns the
/// first column left.
template <std::size_t kVecs, std::size_t kLanes = kColTile>
[[gnu::always_inline]] inline std::size_t column_tiles(const float* x, std::size_t x_stride, std::size_t rows,
                                                       std::size_t in, const float* weight, std::size_t out,
                                                       std::size_t from, float* y, std::size_t y_stride) {
    constexpr std::size_t kWidth = kVecs * kLanes;
    const std::size_t to = from + (out - from) / kWidth * kWidth;
    std::size_t r = 0;
    for (; r + kRowTile <= rows; r += kRowTile) {
        for (std::size_t o = from; o < to; o += kWidth) {
            tile<kRowTile, kVecs, kLanes>(x + r * x_stride, x_stride, in, weight, out, o, y + r * y_stride, y_stride);
        }
    }
    for (; r < rows; ++r) {
        for (std::size_t o = from; o < to; o += kWidth) {
            tile<1, kVecs, kLanes>(x + r * x_stride, x_stride, in, weight, out, o, y + r * y_stride, y_stride);
        }
    }
    return to;
}

/// Outputs from column `from` on, one at a time (the last one to three columns of a width).
inline void tail_columns(const float* x, std::size_t x_stride, std::size_t rows, std::size_t in,
                         const float* weight, std::size_t out, std::size_t from, float* y, std::size_t y_stride) {
    for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t o = from; o < out; ++o) {
            float sum = 0.0f;
            for (std::size_t i = 0; i < in; ++i) sum += x[r * x_stride + i] * weight[i * out + o];
            y[r * y_stride + o] += sum;
        }
    }
}

}  // namespace

MMT_VECTOR_CLONES
void accumulate_product(const float* x, std::size_t x_stride, std::size_t rows, std::size_t in,
                        const float* weight, std::size_t out, float* y, std::size_t y_stride, bool wide_tiles) {
    if (out == 1) {
        // A dot product per row, kColTile partial sums at a time.
        const std::size_t full = in - in % kColTile;
        for (std::size_t r = 0; r < rows; ++r) {
            const float* xr = x + r * x_stride;
            Vec lanes = {};
            for (std::size_t i = 0; i < full; i += kColTile) lanes += load<Vec>(xr + i) * load<Vec>(weight + i);
            float sum = 0.0f;
            for (std::size_t l = 0; l < kColTile; ++l) sum += lanes[l];
            for (std::size_t i = full; i < in; ++i) sum += xr[i] * weight[i];
            y[r * y_stride] += sum;
        }
        return;
    }
    // AVX-512 retires two FMAs a cycle at a latency of four, so it needs eight independent
    // accumulators: 4 rows × 2 vectors. AVX2 has 16 registers, which 4 rows × 1 vector
    // (8 ymm) and its operands already nearly fill.
    std::size_t from = 0;
    if (wide_tiles) from = column_tiles<2>(x, x_stride, rows, in, weight, out, from, y, y_stride);
    from = column_tiles<1>(x, x_stride, rows, in, weight, out, from, y, y_stride);
    from = column_tiles<1, kColTile / 2>(x, x_stride, rows, in, weight, out, from, y, y_stride);
    from = column_tiles<1, kColTile / 4>(x, x_stride, rows, in, weight, out, from, y, y_stride);
    if (from < out) tail_columns(x, x_stride, rows, in, weight, out, from, y, y_stride);
}

bool has_wide_registers() {
#if defined(__GNUC__) && defined(__x86_64__)
    static const bool wide = __builtin_cpu_supports("avx512f");
    return wide;
#else
    return false;
#endif
}

void DenseNet::forward(const float* x, std::size_t rows, float* out, DenseScratch& scratch) const {
    const DenseLayer& first = chain.front();
    fill_bias(first, rows, scratch.a);
    accumulate_product(x, rows, first.in, first.weight.data(), first.out, scratch.a.data());
    forward_from_first(rows, out, scratch);
}

void DenseNet::forward_from_first(std::size_t rows, float* out, DenseScratch& scratch) const {
    std::vector<float>* buffers[3] = {&scratch.a, &scratch.b, &scratch.c};
    std::size_t h = 0;  // the buffer holding the current activations
    if (chain.front().relu) relu(scratch.a.data(), rows * chain.front().out);
    for (std::size_t i = 1; i < chain.size(); ++i) {
        const std::size_t next = (h + 1) % 3;
        apply(chain[i], buffers[h]->data(), rows, *buffers[next]);
        h = next;
    }
    if (deep) {
        const std::size_t width = input_scale.size();
        float* values = buffers[h]->data();
        for (std::size_t r = 0; r < rows; ++r) {
            for (std::size_t j = 0; j < width; ++j) {
                values[r * width + j] = values[r * width + j] * input_scale[j] + input_shift[j];
            }
        }
        for (const auto& [first, second] : blocks) {
            const std::size_t t = (h + 1) % 3, v = (h + 2) % 3;
            apply(first, buffers[h]->data(), rows, *buffers[t]);
            apply(second, buffers[t]->data(), rows, *buffers[v]);
            float* sum = buffers[v]->data();
            const float* skip = buffers[h]->data();
            for (std::size_t i = 0; i < rows * width; ++i) sum[i] = std::max(sum[i] + skip[i], 0.0f);
            h = v;
        }
        const std::size_t next = (h + 1) % 3;
        apply(output, buffers[h]->data(), rows, *buffers[next]);
        h = next;
    }
    std::copy(buffers[h]->begin(), buffers[h]->begin() + static_cast<std::ptrdiff_t>(rows), out);
}

}  // namespace mmt::model
