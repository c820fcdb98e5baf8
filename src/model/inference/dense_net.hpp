#pragma once
// Private: the folded inference network as plain float arrays, run on the CPU by the
// calling thread. Ranking a search space is a few thousand rows through a small network:
// LibTorch's per-operator dispatch and a BLAS thread pool (which, on a busy machine, waits
// for a core at every product) cost more there than the arithmetic itself.

#include <cstddef>
#include <utility>
#include <vector>

namespace mmt::model {

/// y = x · weight + bias, then ReLU when `relu`.
struct DenseLayer {
    std::size_t in = 0;
    std::size_t out = 0;
    /// in × out, row-major: input i's weights to every output. With groups > 1, `groups`
    /// blocks of (in / groups) × (out / groups) one after another: output group g reads
    /// only input group g (an ensemble's hidden layers, a third of the work for three).
    std::vector<float> weight;
    std::vector<float> bias;  ///< out
    bool relu = false;
    std::size_t groups = 1;
};

/// A layer from its dense in × out weights. With `find_blocks`, stored block by block
/// where every weight outside the diagonal blocks of the widest such split is exactly zero.
DenseLayer make_dense_layer(std::size_t in, std::size_t out, std::vector<float> weight, std::vector<float> bias,
                            bool relu, bool find_blocks);

/// Buffers a forward pass reuses; one per thread.
struct DenseScratch {
    std::vector<float> a, b, c;
};

/// Whether the CPU has 32 vector registers of 64 bytes (AVX-512), which take wider tiles.
bool has_wide_registers();

/// rows × out outputs y += x · weight (x: rows × in, row-major; weight: in × out). Row r
/// of x starts at x + r · x_stride, of y at y + r · y_stride. Vectorised for the widest
/// instruction set the CPU has; `wide_tiles` keeps twice the accumulators in registers,
/// for CPUs where has_wide_registers() (any CPU computes the same with either).
void accumulate_product(const float* x, std::size_t x_stride, std::size_t rows, std::size_t in,
                        const float* weight, std::size_t out, float* y, std::size_t y_stride, bool wide_tiles);

inline void accumulate_product(const float* x, std::size_t x_stride, std::size_t rows, std::size_t in,
                               const float* weight, std::size_t out, float* y, std::size_t y_stride) {
    accumulate_product(x, x_stride, rows, in, weight, out, y, y_stride, has_wide_registers());
}

/// The same on packed rows (x_stride = in, y_stride = out).
inline void accumulate_product(const float* x, std::size_t rows, std::size_t in, const float* weight,
                               std::size_t out, float* y) {
    accumulate_product(x, in, rows, in, weight, out, y, out);
}

/// The folded network (folding.hpp) on float arrays: base is a chain of layers; deep is an input
/// layer, an affine map, residual blocks relu(second(first(h)) + h) and an output layer.
class DenseNet {
public:
    std::vector<DenseLayer> chain;  ///< base: every layer; deep: the input layer (the first always dense)
    bool deep = false;
    std::vector<float> input_scale;  ///< deep: applied after the input layer
    std::vector<float> input_shift;
    std::vector<std::pair<DenseLayer, DenseLayer>> blocks;  ///< deep
    DenseLayer output;  ///< deep only

    std::size_t input_dim() const { return chain.front().in; }
    std::size_t first_width() const { return chain.front().out; }

    /// One output per row of x (rows × input_dim()).
    void forward(const float* x, std::size_t rows, float* out, DenseScratch& scratch) const;

    /// The same from the first layer's pre-activations, which the caller computed some
    /// other way and left in scratch.a (rows × first_width(), bias included).
    void forward_from_first(std::size_t rows, float* out, DenseScratch& scratch) const;
};

}  // namespace mmt::model
