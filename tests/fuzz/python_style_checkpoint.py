#!/usr/bin/env python3
"""Re-saves a matmul_toolkit checkpoint the way Python's torch.save lays out a plain dict,
without torch: what a user gets from torch.load(weights_only=True) followed by torch.save.

    python3 python_style_checkpoint.py IN.pt OUT.pt

Differences from the toolkit's own writer that the loader must accept: Python's pickler
(memo BINPUT/BINGET, TUPLE1-3, empty OrderedDict backward hooks), the
archive folder named after the file, torch 2.x's extra records (.data/serialization_id,
.format_version, .storage_alignment) and a plain zip (Python's zipfile: no data
descriptors, no zip64 records). Used to make tests/fuzz/corpus/checkpoint/python_style.pt.
"""

import collections
import io
import pickle
import sys
import types
import zipfile

# Stand-ins for the torch globals, registered under torch's module names so the pickler
# writes GLOBAL torch._utils._rebuild_tensor_v2 and GLOBAL torch.<Type>Storage.
torch = types.ModuleType("torch")
torch_utils = types.ModuleType("torch._utils")
sys.modules["torch"] = torch
sys.modules["torch._utils"] = torch_utils


def _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks):
    return Tensor(storage, offset, size, stride)


_rebuild_tensor_v2.__module__ = "torch._utils"
torch_utils._rebuild_tensor_v2 = _rebuild_tensor_v2
STORAGE_TYPES = {}
for name in ["FloatStorage", "DoubleStorage", "LongStorage", "IntStorage"]:
    cls = type(name, (), {"__module__": "torch"})
    setattr(torch, name, cls)
    STORAGE_TYPES[name] = cls


class Storage:
    def __init__(self, storage_type, key, numel, data):
        self.storage_type, self.key, self.numel, self.data = storage_type, key, numel, data


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride

    def __reduce__(self):
        return (_rebuild_tensor_v2,
                (self.storage, self.offset, self.size, self.stride, False, collections.OrderedDict()))


class Reader(pickle.Unpickler):
    def __init__(self, data, records, prefix):
        super().__init__(io.BytesIO(data))
        self.records, self.prefix = records, prefix

    def find_class(self, module, name):
        if (module, name) == ("torch._utils", "_rebuild_tensor_v2"):
            return _rebuild_tensor_v2
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "torch" and name in STORAGE_TYPES:
            return STORAGE_TYPES[name]
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")

    def persistent_load(self, pid):
        tag, storage_type, key, location, numel = pid
        assert tag == "storage" and location == "cpu", pid
        return Storage(storage_type, key, numel, self.records[f"{self.prefix}/data/{key}"])


class Writer(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.storage_type, obj.key, "cpu", obj.numel)
        return None


def main():
    source, target = sys.argv[1], sys.argv[2]
    with zipfile.ZipFile(source) as z:
        records = {i.filename: z.read(i.filename) for i in z.infolist()}
    prefix = next(iter(records)).split("/")[0]
    root = Reader(records[f"{prefix}/data.pkl"], records, prefix).load()

    storages = {}

    def collect(value):
        if isinstance(value, Tensor):
            storages[value.storage.key] = value.storage
        elif isinstance(value, dict):
            for v in value.values():
                collect(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                collect(v)

    collect(root)
    pkl = io.BytesIO()
    Writer(pkl, protocol=2).dump(root)

    folder = target.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{folder}/data.pkl", pkl.getvalue())
        z.writestr(f"{folder}/.format_version", "1")
        z.writestr(f"{folder}/.storage_alignment", "64")
        z.writestr(f"{folder}/byteorder", "little")
        for key in sorted(storages, key=int):
            z.writestr(f"{folder}/data/{key}", storages[key].data)
        z.writestr(f"{folder}/version", "3\n")
        z.writestr(f"{folder}/.data/serialization_id", "1234567890123456789012345678901234567890")


if __name__ == "__main__":
    main()
