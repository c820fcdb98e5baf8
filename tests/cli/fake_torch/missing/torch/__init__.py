raise ImportError("No module named 'torch' (tests/cli/fake_torch/missing)")
