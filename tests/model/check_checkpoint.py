#!/usr/bin/env python3
"""Checks that a matmul_toolkit checkpoint (.pt) is what Python's torch.load reads.

    python3 check_checkpoint.py MODEL.pt

With torch installed: torch.load with weights_only=True (the default since torch 2.6),
prints the keys, rebuilds the network as torch-diode's model classes lay it out
(nn.Sequential "model", or input_layer / hidden_layers[i].block / output_layer),
loads model_state_dict strictly and predicts the mean feature vector.

Without torch: opens the zip archive, unpickles data.pkl with only the globals
torch.load(weights_only=True) allows, and checks the same keys. Exit code 0 when
everything holds, 1 otherwise.
"""

import pickle
import sys
import zipfile

ALLOWED_GLOBALS = {
    ("torch._utils", "_rebuild_tensor_v2"),
    ("collections", "OrderedDict"),
    ("torch", "FloatStorage"),
    ("torch", "LongStorage"),
    ("torch", "DoubleStorage"),
    ("torch", "IntStorage"),
}
REQUIRED_KEYS = [
    "format", "format_version", "model_type", "hyperparameters", "feature_names",
    "feature_mean", "feature_std", "hardware_name", "parallel_units", "model_state_dict",
]


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def check_common(checkpoint):
    missing = [k for k in REQUIRED_KEYS if k not in checkpoint]
    if missing:
        fail(f"missing keys {missing}")
    if checkpoint["format"] != "matmul_toolkit.runtime_model":
        fail(f"format is {checkpoint['format']!r}")
    print("keys:", list(checkpoint.keys()))
    print("model_type:", checkpoint["model_type"])
    print("hyperparameters:", checkpoint["hyperparameters"])
    print("hardware_name:", checkpoint["hardware_name"], "parallel_units:", checkpoint["parallel_units"])
    print("features:", len(checkpoint["feature_names"]), checkpoint["feature_names"])


def check_with_torch(path, torch):
    from torch import nn

    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # torch < 1.13 has no weights_only
        checkpoint = torch.load(path, map_location="cpu")
    check_common(checkpoint)
    features = len(checkpoint["feature_names"])
    if tuple(checkpoint["feature_mean"].shape) != (features,):
        fail("feature_mean does not have one entry per feature")
    dropout = checkpoint["dropout_rate"]

    def block(i, o):
        return [nn.Linear(i, o), nn.ReLU(), nn.BatchNorm1d(o), nn.Dropout(dropout)]

    if checkpoint["model_type"] == "base":
        dims = checkpoint["hidden_dims"]
        layers, width = [], features
        for d in dims:
            layers += block(width, d)
            width = d
        layers.append(nn.Linear(width, 1))

        class Base(nn.Module):
            def __init__(self):
                super().__init__()
                self.model = nn.Sequential(*layers)

            def forward(self, x):
                return self.model(x)

        net = Base()
    else:
        width = checkpoint["hidden_dim"]

        class Residual(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = nn.Sequential(*block(width, width), nn.Linear(width, width), nn.BatchNorm1d(width))
                self.relu = nn.ReLU()

            def forward(self, x):
                return self.relu(self.block(x) + x)

        class Deep(nn.Module):
            def __init__(self):
                super().__init__()
                self.input_layer = nn.Sequential(*block(features, width))
                self.hidden_layers = nn.ModuleList(Residual() for _ in range(checkpoint["num_layers"]))
                self.output_layer = nn.Linear(width, 1)

            def forward(self, x):
                x = self.input_layer(x)
                for layer in self.hidden_layers:
                    x = layer(x)
                return self.output_layer(x)

        net = Deep()
    net.load_state_dict(checkpoint["model_state_dict"], strict=True)
    net.eval()
    with torch.no_grad():
        # Standardised features of the training mean are all zero.
        prediction = net(torch.zeros(1, features)).item()
    print(f"state_dict: {len(checkpoint['model_state_dict'])} tensors, loaded strictly into the "
          f"torch-diode layout")
    print(f"ln(time ms) predicted at the mean features: {prediction:.6f}")


class RestrictedUnpickler(pickle.Unpickler):
    """Resolves only the globals torch.load(weights_only=True) allows, to stand-ins."""

    def find_class(self, module, name):
        if (module, name) not in ALLOWED_GLOBALS:
            fail(f"pickle names global {module}.{name}, which torch.load(weights_only=True) refuses")
        if name == "_rebuild_tensor_v2":
            return lambda storage, offset, size, stride, *rest: ("tensor", tuple(size))
        if name == "OrderedDict":
            import collections
            return collections.OrderedDict
        return name

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and pid[0] == "storage"):
            fail(f"unexpected persistent id {pid!r}")
        return pid


def check_without_torch(path):
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
        pkl = [n for n in names if n.endswith("/data.pkl")]
        if len(pkl) != 1:
            fail(f"no data.pkl in the archive ({names})")
        prefix = pkl[0][: -len("data.pkl")]
        import io
        checkpoint = RestrictedUnpickler(io.BytesIO(archive.read(pkl[0]))).load()
        storages = [n for n in names if n.startswith(prefix + "data/")]
    check_common(checkpoint)
    if checkpoint["feature_mean"] != ("tensor", (len(checkpoint["feature_names"]),)):
        fail("feature_mean does not have one entry per feature")
    state = checkpoint["model_state_dict"]
    print(f"state_dict: {len(state)} tensors, e.g. {list(state.items())[:2]}; {len(storages)} storages")
    print("(torch is not installed: checked with a restricted unpickler)")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    path = sys.argv[1]
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        print("torch", torch.__version__)
        check_with_torch(path, torch)
    else:
        check_without_torch(path)
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
