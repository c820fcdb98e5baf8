#include "checkpoint_reader.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "matmul_toolkit/core/dataset_io.hpp"
#include "matmul_toolkit/core/error.hpp"
#include "matmul_toolkit/model/features.hpp"
#include "torch_archive_check.hpp"

namespace mmt::model {
namespace {

/// The checkpoint's dicts, read with the checks (and the messages) of a typed reader.
class DictReader {
public:
    DictReader(const ArchiveValue& dict, const std::string& path) : m_dict(dict), m_path(path) {}

    bool has(const std::string& key) const { return m_dict.find(key) != nullptr; }

    const ArchiveValue& get(const std::string& key) const {
        const ArchiveValue* v = m_dict.find(key);
        if (v == nullptr) fail("missing key '" + key + "'");
        return *v;
    }

    std::string get_string(const std::string& key) const {
        const auto& v = get(key);
        if (!v.is_string()) fail("'" + key + "' is not a string");
        return std::string(v.text);
    }

    std::int64_t get_int(const std::string& key) const {
        const auto& v = get(key);
        if (!v.is_int()) fail("'" + key + "' is not an integer");
        return v.integer;
    }

    double get_double(const std::string& key) const {
        const auto& v = get(key);
        if (v.kind == ArchiveValue::Kind::real) return v.real;
        if (v.is_int()) return static_cast<double>(v.integer);
        fail("'" + key + "' is not a number");
    }

    std::vector<std::string> get_strings(const std::string& key) const {
        const auto& v = get(key);
        if (!v.is_list()) fail("'" + key + "' is not a list");
        std::vector<std::string> out;
        for (const auto& item : *v.items) {
            if (!item.is_string()) fail("'" + key + "' holds a non-string");
            out.emplace_back(item.text);
        }
        return out;
    }

    std::vector<int> get_ints(const std::string& key) const {
        const auto& v = get(key);
        if (!v.is_list()) fail("'" + key + "' is not a list");
        std::vector<int> out;
        for (const auto& item : *v.items) {
            if (!item.is_int()) fail("'" + key + "' holds a non-integer");
            out.push_back(static_cast<int>(item.integer));
        }
        return out;
    }

    std::vector<float> get_floats(const std::string& key) const {
        const auto& v = get(key);
        std::vector<float> out;
        if (v.is_tensor()) {
            for (double x : v.tensor->values()) out.push_back(static_cast<float>(x));
        } else if (v.is_list()) {
            for (const auto& item : *v.items) {
                if (item.kind == ArchiveValue::Kind::real) out.push_back(static_cast<float>(item.real));
                else if (item.is_int()) out.push_back(static_cast<float>(item.integer));
                else fail("'" + key + "' holds a non-number");
            }
        } else {
            fail("'" + key + "' is neither a tensor nor a list of numbers");
        }
        return out;
    }

    DictReader sub(const std::string& key) const {
        const auto& v = get(key);
        if (!v.is_dict()) fail("'" + key + "' is not a dict");
        return DictReader(v, m_path);
    }

    const ArchiveValue& dict() const { return m_dict; }

    [[noreturn]] void fail(const std::string& what) const {
        throw core::InputError(m_path, "not a valid matmul_toolkit model checkpoint: " + what);
    }

private:
    const ArchiveValue& m_dict;
    const std::string& m_path;
};

// The Linear weights alone (a lower bound on the parameters): what the file must hold.
double min_parameter_count(const ModelSpec& spec, std::size_t inputs) {
    double count = 0.0;
    double width = static_cast<double>(inputs);
    if (spec.type == ModelType::base) {
        for (int d : spec.hidden_dims) {
            count += width * d;
            width = d;
        }
    } else {
        width = spec.hidden_dim;
        count += static_cast<double>(inputs) * width + 2.0 * width * width * spec.num_layers;
    }
    return count + width;
}

void check_features(const std::vector<std::string>& stored, const std::string& path) {
    const auto& current = feature_names();
    if (stored == current) return;
    std::ostringstream what;
    what << "the model was trained with " << stored.size() << " features but this build computes "
         << current.size();
    for (std::size_t i = 0; i < std::min(stored.size(), current.size()); ++i) {
        if (stored[i] != current[i]) {
            what << " (feature " << i << " is '" << stored[i] << "' in the model, '" << current[i]
                 << "' here)";
            break;
        }
    }
    what << "; retrain the model with this version of matmul_toolkit";
    throw core::InputError(path, what.str());
}

ModelInfo read_info(const DictReader& file, const std::string& where) {
    if (!file.has("format") || file.get_string("format") != kCheckpointFormat) {
        throw core::InputError(where, "not a matmul_toolkit model checkpoint (no format '" +
                                          std::string(kCheckpointFormat) + "'; a torch-diode checkpoint "
                                          "uses other features and can't be loaded)");
    }
    if (file.get_int("format_version") != kCheckpointFormatVersion) {
        throw core::InputError(where, "checkpoint format version " +
                                          std::to_string(file.get_int("format_version")) +
                                          " is not supported (expected " + std::to_string(kCheckpointFormatVersion) + ")");
    }

    ModelInfo info;
    info.feature_names = file.get_strings("feature_names");
    check_features(info.feature_names, where);
    info.spec.type = parse_model_type(file.get_string("model_type"));
    if (info.spec.type == ModelType::base) {
        info.spec.hidden_dims = file.get_ints("hidden_dims");
    } else {
        info.spec.hidden_dim = static_cast<int>(file.get_int("hidden_dim"));
        info.spec.num_layers = static_cast<int>(file.get_int("num_layers"));
    }
    info.spec.dropout_rate = file.get_double("dropout_rate");
    try {
        info.spec.validate();
    } catch (const core::InputError& e) {
        file.fail(e.what());
    }
    info.feature_mean = file.get_floats("feature_mean");
    info.feature_std = file.get_floats("feature_std");
    if (info.feature_mean.size() != num_features() || info.feature_std.size() != num_features()) {
        file.fail("feature_mean / feature_std do not have one entry per feature");
    }
    for (float s : info.feature_std) {
        if (!(s > 0.0f) || !std::isfinite(s)) file.fail("feature_std holds a non-positive value");
    }
    info.hardware_name = file.get_string("hardware_name");
    info.parallel_units = static_cast<int>(file.get_int("parallel_units"));
    if (info.parallel_units <= 0) file.fail("parallel_units is not positive");
    info.toolkit_version = file.has("toolkit_version") ? file.get_string("toolkit_version") : "";
    info.vendor_rows = file.has("vendor_rows") && file.get_int("vendor_rows") != 0;
    info.ensemble = file.has("ensemble") ? static_cast<int>(file.get_int("ensemble")) : 1;
    if (file.has("hyperparameters")) {
        const auto hyper = file.sub("hyperparameters");
        if (hyper.has("learning_rate")) info.learning_rate = hyper.get_double("learning_rate");
        if (hyper.has("weight_decay")) info.weight_decay = hyper.get_double("weight_decay");
        if (hyper.has("batch_size")) info.batch_size = static_cast<int>(hyper.get_int("batch_size"));
        if (hyper.has("num_epochs")) info.num_epochs = static_cast<int>(hyper.get_int("num_epochs"));
        if (hyper.has("patience")) info.patience = static_cast<int>(hyper.get_int("patience"));
        if (hyper.has("lr_decay_after")) info.lr_decay_after = static_cast<int>(hyper.get_int("lr_decay_after"));
        if (hyper.has("lr_decay")) info.lr_decay = hyper.get_double("lr_decay");
        if (hyper.has("weight_average")) info.weight_average = hyper.get_double("weight_average");
        if (hyper.has("seed")) info.seed = hyper.get_string("seed");
    }
    if (file.has("training")) {
        const auto training = file.sub("training");
        info.epochs_run = static_cast<int>(training.get_int("epochs_run"));
        info.best_epoch = static_cast<int>(training.get_int("best_epoch"));
        info.best_validation_loss = training.get_double("best_validation_loss");
        info.train_problems = static_cast<std::size_t>(training.get_int("train_problems"));
        info.train_rows = static_cast<std::size_t>(training.get_int("train_rows"));
    }
    return info;
}

StateDict read_state(const DictReader& state, const ModelSpec& spec) {
    const auto expected = expected_state_dict(spec, num_features());
    StateDict out;
    out.reserve(expected.size());
    for (const auto& [name, sizes] : expected) {
        const auto& v = state.get(name);
        if (!v.is_tensor()) state.fail("model_state_dict['" + name + "'] is not a tensor");
        if (v.tensor->sizes != sizes) {
            state.fail("model_state_dict['" + name + "'] has shape " + sizes_text(v.tensor->sizes) +
                       ", the architecture needs " + sizes_text(sizes));
        }
        out.emplace_back(name, StateTensor{sizes, v.tensor->values()});
    }
    for (const auto& [key, value] : *state.dict().entries) {
        const std::string name = key.is_string() ? std::string(key.text) : "?";
        const bool known = std::any_of(expected.begin(), expected.end(), [&](const auto& e) { return e.first == name; });
        if (!known) state.fail("model_state_dict has an unexpected entry '" + name + "'");
    }
    return out;
}

// Linear -> ReLU -> BatchNorm1d -> Dropout: a Linear's and a BatchNorm's entries, under `prefix`.
void append_block(std::vector<StateEntry>& out, const std::string& prefix, std::int64_t in, std::int64_t width,
                  int linear, int norm) {
    const std::string l = prefix + std::to_string(linear) + ".";
    out.push_back({l + "weight", {width, in}});
    out.push_back({l + "bias", {width}});
    const std::string n = prefix + std::to_string(norm) + ".";
    for (const char* name : {"weight", "bias", "running_mean", "running_var"}) out.push_back({n + name, {width}});
    out.push_back({n + "num_batches_tracked", {}});
}

}  // namespace

std::string sizes_text(const std::vector<std::int64_t>& sizes) {
    std::string out = "[";
    for (std::size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
    return out + "]";
}

std::vector<StateEntry> expected_state_dict(const ModelSpec& spec, std::size_t inputs) {
    std::vector<StateEntry> out;
    auto in = static_cast<std::int64_t>(inputs);
    if (spec.type == ModelType::base) {
        int index = 0;
        for (int width : spec.hidden_dims) {
            append_block(out, "model.", in, width, index, index + 2);
            in = width;
            index += 4;
        }
        out.push_back({"model." + std::to_string(index) + ".weight", {1, in}});
        out.push_back({"model." + std::to_string(index) + ".bias", {1}});
        return out;
    }
    const std::int64_t width = spec.hidden_dim;
    append_block(out, "input_layer.", in, width, 0, 2);
    for (int b = 0; b < spec.num_layers; ++b) {
        const std::string block = "hidden_layers." + std::to_string(b) + ".block.";
        append_block(out, block, width, width, 0, 2);
        // The block's second Linear and the BatchNorm after it (entries 4 and 5).
        out.push_back({block + "4.weight", {width, width}});
        out.push_back({block + "4.bias", {width}});
        for (const char* name : {"weight", "bias", "running_mean", "running_var"}) out.push_back({block + "5." + name, {width}});
        out.push_back({block + "5.num_batches_tracked", {}});
    }
    out.push_back({"output_layer.weight", {1, width}});
    out.push_back({"output_layer.bias", {1}});
    return out;
}

const StateTensor* find_state(const StateDict& state, const std::string& name) {
    for (const auto& [key, tensor] : state) {
        if (key == name) return &tensor;
    }
    return nullptr;
}

Checkpoint read_checkpoint_bytes(std::string bytes, const std::string& where) {
    // Nothing is trusted before the walk of the zip and the pickle has accepted it.
    const TorchArchive archive = read_torch_archive(std::move(bytes), where);
    const DictReader file(archive.root, where);
    Checkpoint checkpoint;
    checkpoint.info = read_info(file, where);
    // The weights are in the file, so an architecture needing more than it holds is refused
    // before anything is sized by it (a 4-byte hidden size could ask for terabytes).
    if (const double needed = min_parameter_count(checkpoint.info.spec, num_features());
        needed > static_cast<double>(archive.summary.storage_elements)) {
        file.fail("the architecture needs at least " + std::to_string(static_cast<std::uint64_t>(std::min(needed, 1e18))) +
                  " weights, the file holds " + std::to_string(archive.summary.storage_elements));
    }
    checkpoint.state = read_state(file.sub("model_state_dict"), checkpoint.info.spec);
    return checkpoint;
}

Checkpoint read_checkpoint(const std::filesystem::path& path) {
    return read_checkpoint_bytes(core::read_file(path), path.string());
}

}  // namespace mmt::model
