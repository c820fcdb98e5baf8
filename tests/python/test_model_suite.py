"""bench/models (the whole-model suite) without a GPU: the workload definitions, the variant
grammar, the summary arithmetic, the in-graph attribution and the parent's resume, the last
against a fake workload process. The real run needs torch, transformers and a GPU; it is
skipped here, visibly."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import textwrap
import types
from pathlib import Path
from typing import Any, Optional

import pytest

SOURCE_DIR = Path(__file__).resolve().parents[2]
SUITE_DIR = SOURCE_DIR / "bench" / "models"


def load(name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, SUITE_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


W = load("workloads")
S = load("summary")
load("autotune_state")  # ingraph reads the kept configs through it
G = load("ingraph")
suite = load("suite")


# ------------------------------------------------------------------------------ workloads
def test_the_suite_covers_the_model_kinds_the_issue_names() -> None:
    W.check()
    names = [w.name for w in W.WORKLOADS]
    assert len(names) >= 10 and len(set(names)) == len(names)
    families = {w.family for w in W.WORKLOADS}
    assert {"decoder", "encoder", "encoder-decoder", "vision", "mixture-of-experts"} <= families
    models = {w.model for w in W.WORKLOADS}
    assert {"LlamaForCausalLM", "GPT2LMHeadModel", "BertModel", "vit_b_16"} <= models
    assert models & {"Qwen2ForCausalLM", "MistralForCausalLM"}
    assert models & {"T5ForConditionalGeneration", "WhisperForConditionalGeneration"}
    assert models & {"swin_t", "convnext_tiny"}
    tags = {t for w in W.WORKLOADS for t in w.tags}
    assert {"prefill", "decode", "dynamic"} <= tags
    assert any(w.dtype == "float16" for w in W.WORKLOADS)
    assert [w.mode for w in W.WORKLOADS].count(W.TRAINING) >= 1


def test_by_name_keeps_suite_order_and_refuses_unknown_names() -> None:
    assert [w.name for w in W.by_name(["vit_b_16", "llama_prefill"])] == ["llama_prefill", "vit_b_16"]
    assert W.by_name(None) == list(W.WORKLOADS)
    with pytest.raises(W.WorkloadError, match="unknown workload nope"):
        W.by_name(["nope"])


@pytest.mark.parametrize("change, message", [
    (dict(library="keras"), "unknown library"),
    (dict(config=None), "config class"),
    (dict(inputs="audio"), "unknown inputs"),
    (dict(dtype="int8"), "dtype"),
    (dict(batch=0), "positive"),
    (dict(mode=W.TRAINING, inputs=W.IMAGES), "token inputs"),
    (dict(lengths=(128, 256)), "dynamic lengths"),  # bert_base's seq is 256: the first length must be it
    (dict(lengths=(256, 256)), "dynamic lengths"),
    (dict(tolerance=0.0), "tolerance"),
])
def test_check_refuses_inconsistent_definitions(change: dict[str, Any], message: str) -> None:
    import dataclasses

    good = W.by_name(["bert_base"])[0]
    with pytest.raises(W.WorkloadError, match=message):
        W.check((dataclasses.replace(good, **change),))
    with pytest.raises(W.WorkloadError, match="repeat"):
        W.check((good, good))


class FakeTensor:
    def __init__(self, shape: tuple[int, ...], kind: str) -> None:
        self.shape, self.kind, self.device, self.dtype = shape, kind, "cpu", None

    def to(self, device: str = "cpu", dtype: Any = None) -> FakeTensor:
        self.device, self.dtype = device, dtype or self.dtype
        return self


class FakeTorch:
    """What workloads.build reads of torch."""
    bfloat16, float16 = "bf16", "fp16"

    def __init__(self) -> None:
        self.seeds: list[int] = []

    def manual_seed(self, seed: int) -> None:
        self.seeds.append(seed)

    @staticmethod
    def no_grad() -> Any:
        import contextlib

        return contextlib.nullcontext()

    class Generator:
        def __init__(self, device: str) -> None:
            pass

        def manual_seed(self, seed: int) -> Any:
            return self

    @staticmethod
    def randint(low: int, high: int, shape: tuple[int, ...], generator: Any = None) -> FakeTensor:
        return FakeTensor(shape, f"randint<{high}")

    @staticmethod
    def rand(shape: tuple[int, ...], generator: Any = None) -> FakeTensor:
        return FakeTensor(shape, "rand")


class FakeModel:
    def __init__(self, config: Any) -> None:
        self.config, self.mode = config, None

    def to(self, device: str, dtype: Any) -> FakeModel:
        self.device, self.dtype = device, dtype
        return self

    def eval(self) -> FakeModel:
        self.mode = "eval"
        return self

    def train(self) -> FakeModel:
        self.mode = "train"
        return self

    def __call__(self, **inputs: Any) -> Any:
        return types.SimpleNamespace(logits=("logits", inputs))


def fake_transformers(monkeypatch: pytest.MonkeyPatch, config_class: str, model_class: str) -> None:
    module = types.ModuleType("transformers")

    class Config(types.SimpleNamespace):
        pass

    setattr(module, config_class, Config)
    setattr(module, model_class, FakeModel)
    monkeypatch.setitem(sys.modules, "transformers", module)


def test_build_makes_the_config_and_seeded_token_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    w = W.by_name(["llama_decode"])[0]
    fake_transformers(monkeypatch, "LlamaConfig", "LlamaForCausalLM")
    torch = FakeTorch()
    instance = W.build(torch, w, device="cuda", seed=5)
    config = instance.module.config
    assert config.hidden_size == 2048 and config.num_key_value_heads == 4 and config.vocab_size == 32000
    assert config._attn_implementation == "sdpa" and config.use_cache is False
    assert instance.module.mode == "eval" and instance.module.dtype == "bf16" and instance.module.device == "cuda"
    ids = instance.inputs["input_ids"]
    assert ids.shape == (16, 1) and ids.kind == "randint<32000" and ids.device == "cuda"
    assert torch.seeds == [5]
    assert instance.call(instance.module)[0] == "logits"


def test_a_dynamic_workload_runs_its_module_at_each_length(monkeypatch: pytest.MonkeyPatch) -> None:
    w = W.by_name(["llama_dynamic"])[0]
    fake_transformers(monkeypatch, "LlamaConfig", "LlamaForCausalLM")
    torch = FakeTorch()
    instance = W.build(torch, w)
    longer = instance.at_length(torch, 512)
    assert instance.inputs["input_ids"].shape == (4, 128) and longer.inputs["input_ids"].shape == (4, 512)
    assert longer.module is instance.module and "dynamic=True" in w.describe()


def test_build_gives_seq2seq_models_decoder_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    w = W.by_name(["t5_small"])[0]
    fake_transformers(monkeypatch, "T5Config", "T5ForConditionalGeneration")
    instance = W.build(FakeTorch(), w)
    assert instance.inputs["input_ids"].shape == (8, 256)
    assert instance.inputs["decoder_input_ids"].shape == (8, 64)


def test_build_gives_vision_models_images_in_their_dtype(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("torchvision")
    module.models = types.SimpleNamespace(vit_b_16=lambda weights=None: FakeModel(None))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torchvision", module)
    instance = W.build(FakeTorch(), W.by_name(["vit_b_16"])[0])
    assert instance.inputs["x"].shape == (16, 3, 224, 224) and instance.inputs["x"].dtype == "bf16"


def test_output_tensor_reads_logits_hidden_states_or_the_tensor() -> None:
    assert W.output_tensor(types.SimpleNamespace(logits=1, last_hidden_state=2)) == 1
    assert W.output_tensor(types.SimpleNamespace(logits=None, last_hidden_state=2)) == 2
    assert W.output_tensor((3, 4)) == 3
    assert W.output_tensor(5) == 5


# ------------------------------------------------------------------------------- variants
@pytest.mark.parametrize("text, base, policy, settings", [
    ("default", "default", None, ()),
    ("ours", "ours", None, ()),
    ("table@isolated", "table", "isolated", ()),
    ("max_autotune_gemm+noepi+noflush", "max_autotune_gemm", None, ("+noepi", "+noflush")),
    ("max_autotune+gated", "max_autotune", None, ("+gated",)),
    ("ours@graph+noepi", "ours", "graph", ("+noepi",)),
    ("ours@isolated", "ours", "isolated", ()),
    ("ours+outeraten", "ours", None, ("+outeraten",)),
    ("ours@graph-both-addmm+outeraten", "ours", "graph-both-addmm", ("+outeraten",)),
    ("ours+defaulttuned", "ours", None, ("+defaulttuned",)),
    ("max_autotune+defaulttuned", "max_autotune", None, ("+defaulttuned",)),
    ("max_autotune_gemm+atenonly+biasaddmm", "max_autotune_gemm", None, ("+atenonly", "+biasaddmm")),
    ("ours+pwtuned+noflush", "ours", None, ("+pwtuned", "+noflush")),
    ("max_autotune_gemm+pwfixed", "max_autotune_gemm", None, ("+pwfixed",)),
    ("ours+nopatchify", "ours", None, ("+nopatchify",)),
])
def test_variant_names_read_as_base_policy_and_settings(text: str, base: str, policy: Any, settings: Any) -> None:
    v = suite.parse_variant(text)
    assert (v.name, v.base, v.policy, v.settings) == (text, base, policy, settings)


@pytest.mark.parametrize("text, message", [
    ("fast", "BASE"), ("default+noepi", "no settings"), ("max_autotune@graph", "only ours and table"),
    ("ours+turbo", "unknown setting"), ("ours+noepi+noepi", "repeats"), ("ours+biasaddmm", "names its ATen"), ("use_model", "BASE"),
    ("max_autotune_gemm+outeraten", "inside ours only"), ("table+outeraten", "inside ours only"),
    ("default+defaulttuned", "no settings"), ("ours+atenonly", "limits GEMM autotuning"),
    ("table+atenonly", "limits GEMM autotuning"), ("default+pwfixed", "no settings"),
    ("ours+pwfixed", "fixed block size already"), ("max_autotune+pwtuned", "only ours and table take .pwtuned"),
    ("max_autotune+pwfixed", "tunes pointwise kernels whatever"), ("table+nopatchify", "only ours takes .nopatchify"),
])
def test_bad_variant_names_are_usage_errors(text: str, message: str) -> None:
    with pytest.raises(suite.UsageError, match=message):
        suite.parse_variant(text)


KERNEL = {"template_id": "triton::mm", "BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 16, "GROUP_M": 8, "num_stages": 1,
          "num_warps": 2}


def picked(kernel_ms: float, vendor_ms: float) -> dict[str, Any]:
    return {"policy": "graph", "entries": [KERNEL], "predicted_ms": [kernel_ms], "kernel_ms": kernel_ms,
            "vendor_ms": vendor_ms, "decision": "kernel"}


def test_outeraten_puts_the_models_k1_picks_on_aten_and_leaves_the_rest() -> None:
    rotary = {"M": 64, "N": 512, "K": 1}
    assert suite.outer_products_on_aten("mm", rotary, picked(0.0039, 0.0069)) == {
        "policy": "graph", "entries": [{"template_id": "aten::mm"}], "predicted_ms": [0.0069], "kernel_ms": 0.0039,
        "vendor_ms": 0.0069, "decision": "aten"}
    assert suite.outer_products_on_aten("addmm_nt", rotary, picked(1, 2))["entries"] == [
        {"template_id": "aten::bias_addmm"}]
    assert suite.outer_products_on_aten("bmm", rotary, picked(1, 2))["entries"] == [{"template_id": "aten::bmm"}]
    assert suite.outer_products_on_aten("mm_nt", {"M": 1024, "N": 8, "K": 1024}, picked(1, 2)) == picked(1, 2)
    aten = dict(picked(2, 1), entries=[{"template_id": "aten::mm"}], decision="aten")
    assert suite.outer_products_on_aten("mm", rotary, aten) is aten


def test_each_base_compiles_with_its_inductor_settings() -> None:
    def kwargs(text: str) -> dict[str, Any]:
        return suite.parse_variant(text).compile_kwargs()

    assert kwargs("default") == {"options": {"triton.cudagraphs": True}}
    assert kwargs("max_autotune") == {"mode": "max-autotune"}
    assert kwargs("max_autotune_gemm") == {"options": {"triton.cudagraphs": True, "max_autotune_gemm": True}}
    # ours and the table: use_model's compile_options, pointwise kernels on a fixed block size
    assert kwargs("ours") == kwargs("table") == kwargs("max_autotune_gemm+pwfixed") == {"options": {
        "triton.cudagraphs": True, "max_autotune_gemm": True, "triton.autotune_pointwise": False}}
    assert kwargs("ours+pwtuned") == kwargs("table+pwtuned") == kwargs("max_autotune_gemm")
    assert kwargs("max_autotune+noepi") == {"options": {"max_autotune": True, "coordinate_descent_tuning": True,
                                                        "triton.cudagraphs": True, "benchmark_epilogue_fusion": False}}
    assert kwargs("max_autotune_gemm+flexible")["options"]["max_autotune_allow_flexible_layouts"] is True
    assert kwargs("max_autotune_gemm+atenonly+biasaddmm") == {"options": {
        "triton.cudagraphs": True, "max_autotune_gemm": True, "max_autotune_gemm_backends": "ATEN"}}


def test_default_runs_first_because_its_gemms_make_the_tables() -> None:
    ordered = suite.variant_order([suite.parse_variant(v) for v in ("ours", "max_autotune", "default")])
    assert [v.name for v in ordered] == ["default", "ours", "max_autotune"]


# -------------------------------------------------------------------------------- summary
def result(ms: float, compile_s: float, **extra: Any) -> dict[str, Any]:
    return {"ms": ms, "compile_s": compile_s, **extra}


DOCUMENT = {"workloads": {
    "a": {"default": result(2.0, 10.0), "max_autotune": result(2.5, 100.0), "ours": result(1.6, 12.0)},
    "b": {"default": result(1.0, 20.0), "max_autotune": result(0.8, 80.0), "ours": result(1.0, 30.0)},
}}


def test_speed_and_compile_ratios_against_each_reference() -> None:
    s = S.summarize(DOCUMENT)
    a = s["ours"]["workloads"]["a"]
    assert a["speed_vs_default"] == pytest.approx(1.25) and a["speed_vs_max_autotune"] == pytest.approx(2.5 / 1.6)
    assert a["compile_vs_default"] == pytest.approx(1.2) and a["compile_vs_max_autotune"] == pytest.approx(0.12)
    assert s["ours"]["speed_vs_default_geomean"] == pytest.approx(math.sqrt(1.25 * 1.0))
    assert s["ours"]["speed_vs_default_min"] == pytest.approx(1.0)
    assert s["ours"]["speed_vs_max_autotune_min"] == pytest.approx(0.8)
    assert s["ours"]["compile_vs_default_max"] == pytest.approx(1.5)
    assert s["default"]["speed_vs_default_geomean"] == pytest.approx(1.0)
    assert "targets" not in s["default"] and "targets" not in s["max_autotune"]


def test_targets_say_met_missed_or_open() -> None:
    targets = S.summarize(DOCUMENT)["ours"]["targets"]
    assert targets == {"speed_vs_default_min": True, "speed_vs_default_geomean": True,
                       "speed_vs_max_autotune_min": False, "compile_vs_default_max": False}
    partial = {"workloads": {"a": DOCUMENT["workloads"]["a"], "b": {"default": result(1.0, 20.0)}}}
    open_targets = S.summarize(partial)["ours"]["targets"]
    # A pass needs every workload measured; a miss is a miss already.
    assert open_targets["speed_vs_default_min"] is None and open_targets["compile_vs_default_max"] is None


def test_a_failed_or_wrong_variant_counts_nowhere() -> None:
    document = {"workloads": {"a": {"default": result(2.0, 10.0), "ours": {"ms": None, "compile_s": 3.0,
                                                                          "error": "wrong result"}}}}
    s = S.summarize(document)["ours"]
    assert s["measured"] == 0 and s["failed"] == ["a"] and s["speed_vs_default_geomean"] is None
    assert "failed" in S.table(document) and "failed: a" in S.overview(S.summarize(document))


def test_the_table_lists_every_variant_with_its_speeds() -> None:
    text = S.table(DOCUMENT)
    lines = text.splitlines()
    assert lines[0].startswith("| workload | default: ms, compile s | max_autotune: ms, compile s | ours: ms")
    assert "| a | 2.000, 10.0 | 2.500, 100.0 | 1.600, 12.0 | 0.800 / – | 1.250 / 1.562 |" in lines


def test_a_dynamic_workload_shows_its_speed_at_each_length_and_where_the_host_set_the_pace() -> None:
    def dynamic(by_length: dict[str, float], host: dict[str, float], run: str = "r1") -> dict[str, Any]:
        return result(S.geomean(list(by_length.values())) or 0.0, 60.0, run=run, ms_by_length=by_length,
                      host_ms_by_length=host)

    document = {"workloads": {"d": {
        "default": dynamic({"128": 0.71, "512": 2.046}, {"128": 0.70, "512": 0.50}),
        "ours": dynamic({"128": 0.915, "512": 2.041}, {"128": 0.90, "512": 0.52}),
        # The host took 0.6 of 0.71 ms at 128 tokens in this one's rounds: not its pace.
        "mode": dynamic({"128": 0.71, "512": 2.0}, {"128": 0.60, "512": 0.5}),
        "elsewhere": dynamic({"128": 0.71, "512": 2.0}, {}, run="r2"),
    }}}
    rows = S.summarize(document)
    lengths = rows["ours"]["workloads"]["d"]["lengths_vs_default"]
    assert lengths["128"] == {"speed": pytest.approx(0.71 / 0.915), "host_paced": True}
    assert lengths["512"] == {"speed": pytest.approx(2.046 / 2.041), "host_paced": False}
    # Either side's host setting the pace marks the length.
    assert rows["mode"]["workloads"]["d"]["lengths_vs_default"]["128"]["host_paced"] is True
    assert rows["elsewhere"]["workloads"]["d"]["lengths_vs_default"] is None  # another run
    assert "(128: 0.776, host-paced; 512: 1.002) /" in S.table(document)
    assert S.host_paced(document["workloads"]["d"]["mode"], "128") is False
    # Not known: no time a call to set the host's against, or no host time kept (older runs).
    assert S.host_paced({"host_ms_by_length": {"128": 0.7}}, "128") is None
    older = {"d": {"default": dynamic({"128": 0.71, "512": 2.0}, {}), "ours": document["workloads"]["d"]["ours"]}}
    assert S.speeds_by_length(older["d"], "ours", "default") == {
        "128": {"speed": pytest.approx(0.71 / 0.915), "host_paced": True},
        "512": {"speed": pytest.approx(2.0 / 2.041), "host_paced": None}}
    assert "(128: 0.776, host-paced; 512: 0.980) host time not kept /" in S.table({"workloads": older})


def test_several_compiles_show_the_variants_spread_beside_defaults_own() -> None:
    def compiled(ms: float, each: list[float], run: str = "r1") -> dict[str, Any]:
        return result(ms, 5.0, run=run, compiles=[{"ms": x, "compile_s": 5.0} for x in each])

    document = {"workloads": {
        "a": {"default": compiled(2.0, [2.0, 1.9, 2.1]), "ours": compiled(2.05, [2.0, 2.05, 2.2])},
        "b": {"default": compiled(1.0, [1.0, 1.1]), "ours": compiled(1.0, [1.0, 1.0], run="r2")},  # other runs
        "c": {"default": compiled(1.0, [1.0]), "ours": compiled(1.0, [1.0])},  # one compile each
    }}
    rows = S.summarize(document)["ours"]["workloads"]
    spread = rows["a"]["compiles_vs_default"]
    assert spread["low"] == pytest.approx(2.0 / 2.2) and spread["high"] == pytest.approx(1.0)
    assert spread["reference_low"] == pytest.approx(2.0 / 2.1) and spread["reference_high"] == pytest.approx(2.0 / 1.9)
    assert spread["compiles"] == 3
    assert rows["b"]["compiles_vs_default"] is None and rows["c"]["compiles_vs_default"] is None
    assert "| 0.976, compiles 0.909-1.000, default's 0.952-1.053 / – |" in S.table(document)


def test_device_time_compares_the_profiles_of_one_run_only() -> None:
    def profiled(ms: float, total_us: float, run: str) -> dict[str, Any]:
        return result(ms, 5.0, run=run, in_graph={"breakdown_us": {"total": total_us}})

    document = {"workloads": {
        "a": {"default": profiled(2.0, 1800.0, "r1"), "ours": profiled(1.8, 1500.0, "r1")},
        "b": {"default": profiled(1.0, 900.0, "r1"), "ours": profiled(1.1, 1000.0, "r2")},  # other runs
        "c": {"default": result(1.0, 5.0), "ours": result(1.0, 5.0)},  # not profiled
    }}
    s = S.summarize(document)["ours"]
    assert s["workloads"]["a"]["device_vs_default"] == pytest.approx(1.2)
    assert s["workloads"]["b"]["device_vs_default"] is None and s["workloads"]["c"]["device_vs_default"] is None
    assert s["device_vs_default_measured"] == 1 and s["device_vs_default_min"] == pytest.approx(1.2)
    assert "device time vs default geomean 1.200 (min 1.200, 1 profiled)" in S.overview(S.summarize(document))
    empty = {"workloads": {"a": {"default": profiled(2.0, 0.0, "r1"), "ours": profiled(1.8, 1500.0, "r1")}}}
    assert S.summarize(empty)["ours"]["workloads"]["a"]["device_vs_default"] is None


def test_rounds_that_took_turns_pair_up_into_a_noise_band() -> None:
    def timed(ms: float, rounds: list[float], run: str = "r1") -> dict[str, Any]:
        return result(ms, 5.0, run=run, rounds_ms=rounds)

    # Round by round default / ours: 1.1, 1.0, 1.2, 1.1, 1.0 (a drift both shared)
    default = timed(1.1, [1.1, 1.2, 1.2, 1.1, 1.0])
    ours = timed(1.0, [1.0, 1.2, 1.0, 1.0, 1.0])
    turns = {"runs": {"r1": {"timing": f"median of rounds, the variants' {S.TURNS}"}},
             "workloads": {"a": {"default": default, "ours": ours}}}
    band = S.summarize(turns)["ours"]["workloads"]["a"]["rounds_vs_default"]
    assert band["rounds"] == 5 and band["median"] == pytest.approx(1.1)
    assert band["q1"] == pytest.approx(1.0) and band["q3"] == pytest.approx(1.15)
    assert "| 1.100 [1.000-1.150] / – |" in S.table(turns)
    # Timed one variant after the other, or in two runs: no pairs.
    sequential = turns | {"runs": {"r1": {"timing": "median of rounds, one variant after the other"}}}
    assert S.summarize(sequential)["ours"]["workloads"]["a"]["rounds_vs_default"] is None
    apart = turns | {"workloads": {"a": {"default": default, "ours": timed(1.0, [1.0] * 5, run="r2")}}}
    assert S.summarize(apart)["ours"]["workloads"]["a"]["rounds_vs_default"] is None
    # Too few rounds, unequal counts, or a dynamic workload (rounds of its first length only).
    three = (timed(1.1, [1.1, 1.2, 1.2]), timed(1.0, [1.0, 1.2, 1.0]))
    unequal = (default, timed(1.0, [1.0] * 6))
    dynamic = (default | {"ms_by_length": {"8": 1.1}}, ours | {"ms_by_length": {"8": 1.0}})
    for base_, mine in (three, unequal, dynamic):
        other = turns | {"workloads": {"a": {"default": base_, "ours": mine}}}
        assert S.summarize(other)["ours"]["workloads"]["a"]["rounds_vs_default"] is None
    # Results without a run are never paired.
    unstamped = {"workloads": {"a": {"default": result(1.0, 5.0, rounds_ms=[1.0] * 5),
                                     "ours": result(1.0, 5.0, rounds_ms=[1.0] * 5)}}}
    assert S.summarize(unstamped)["ours"]["workloads"]["a"]["rounds_vs_default"] is None


# -------------------------------------------------------------------------------- in graph
def test_kernels_fall_into_categories_by_name() -> None:
    assert G.category("triton_tem_fused_addmm_gelu_0") == G.GEMM
    assert G.category("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_bias_TNT") == G.GEMM
    assert G.category("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x128x8") == G.GEMM
    assert G.category("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_tn_align1>(x)") == G.GEMM
    assert G.category("triton_poi_fused_gelu_view_7") == G.OTHER
    assert G.category("triton_poi_fused__scaled_dot_product_efficient_attention_view_3") == G.OTHER
    assert G.category("fmha_cutlassF_bf16_aligned_64x128_rf_sm80(x)") == G.ATTENTION
    assert G.category("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16") == G.ATTENTION
    assert G.category("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_cudnn") == G.CONVOLUTION
    assert G.category("_ZN7cutlass13device_kernelIN2at4cuda6detail25GroupProblemShapeIN4cute") == G.OTHER_GEMM
    assert G.category("Memcpy DtoD (Device -> Device)") == G.OTHER
    # Inductor's convolution template (max_autotune_gemm autotunes convolutions) is no GEMM.
    assert G.category("triton_tem_fused_convolution_0") == G.CONVOLUTION
    assert G.category("triton_tem_fused_addmm_convolution_relu_2") == G.GEMM


def test_a_split_k_reduction_belongs_to_the_gemm_before_it() -> None:
    kernels = [("nvjet_a_splitK_TNT", 5.0), ("void cublasLt::splitKreduce_kernel<32>", 1.0),
               ("triton_poi_x", 2.0), ("nvjet_b", 3.0)]
    gemms = G.gemm_kernels(kernels)
    assert [(g.names, g.us) for g in gemms] == [(["nvjet_a_splitK_TNT", "void cublasLt::splitKreduce_kernel<32>"], 6.0),
                                                (["nvjet_b"], 3.0)]


def test_a_profile_splits_into_identical_calls_with_median_times() -> None:
    kernels = [("a", 1.0), ("b", 2.0), ("a", 3.0), ("b", 2.0), ("a", 2.0), ("b", 8.0)]
    assert G.per_call_kernels(kernels, 3) == [("a", 2.0), ("b", 2.0)]
    with pytest.raises(ValueError, match="do not split"):
        G.split_calls(kernels[:5], 3)
    with pytest.raises(ValueError, match="different kernels"):
        G.split_calls([("a", 1.0), ("b", 1.0)], 2)


def test_the_timeline_finds_the_gpus_waits_and_where_they_fall() -> None:
    # Two calls of three kernels; the second kernel overlaps the first by 1 µs; a call waits
    # 4 then 6 µs before its third kernel, and 10 µs pass between the calls.
    one = [("a", 0.0, 5.0), ("b", 4.0, 8.0), ("c", 12.0, 15.0)]
    spans = one + [(n, s + 25.0, e + 25.0) for n, s, e in one]
    spans[5] = ("c", 39.0, 40.0)
    t = G.timeline(spans, 2)
    assert t["span_us_a_call"] == pytest.approx(20.0)
    assert t["busy_us_a_call"] == pytest.approx((11.0 + 9.0) / 2)
    assert t["idle_us_a_call"] == pytest.approx(20.0 - 10.0)
    assert t["longest_gaps"] == [{"us": 5.0, "after": "b", "before": "c"}]
    assert G.timeline([], 1) == {}
    # Calls of unequal kernel counts: the totals, no places.
    assert "longest_gaps" not in G.timeline(spans[:5], 2)


def test_the_report_keeps_the_costliest_other_kernels_and_what_moved() -> None:
    # Inductor numbers its kernels: the same fused kernel is _3 in one program, _5 in another.
    base = G.report([("triton_red_ln_3", 10.0), ("nvjet_x", 30.0), ("triton_red_ln_4", 6.0), ("triton_poi_add", 2.0)],
                    1, [record("mm", 8, 8, 8)], spans=[("nvjet_x", 0.0, 30.0)])
    assert base["other_kernels"] == [{"kernel": "triton_red_ln", "count": 2, "total_us": 16.0},
                                     {"kernel": "triton_poi_add", "count": 1, "total_us": 2.0}]
    assert base["timeline"]["busy_us_a_call"] == pytest.approx(30.0)
    other = G.report([("triton_red_ln_5", 40.0), ("nvjet_x", 30.0), ("triton_poi_mul", 0.5)], 1, [record("mm", 8, 8, 8)])
    assert "timeline" not in other
    moved = G.other_kernels_versus(base, other)
    assert [(r["kernel"], r["delta_us"]) for r in moved] == [("triton_red_ln", 24.0), ("triton_poi_add", -2.0),
                                                             ("triton_poi_mul", 0.5)]
    document = {"workloads": {"w": {"default": result(1.0, 5.0, in_graph=base, run="r1"),
                                    "ours": result(1.0, 5.0, in_graph=other, run="r1")}}}
    lines = G.text(document).splitlines()
    assert "   in the profiled calls: span 30.0 µs a call, kernels busy 30.0, the GPU idle 0.0" in lines
    assert any(line.startswith("     triton_red_ln") and line.endswith("40.0 against     16.0 (+24.0)")
               for line in lines)
    assert not any("triton_poi_mul" in line for line in lines)  # moved by less than 1 µs


def test_runtime_tuned_kernels_are_read_from_the_compiles_cache(tmp_path: Path) -> None:
    def kernel(folder: str, stem: str, name: str, kept: Any) -> None:
        (tmp_path / folder).mkdir(exist_ok=True)
        (tmp_path / folder / f"{stem}.py").write_text(f"import triton\n\n@triton.jit\ndef {name}(in_ptr0, xnumel):\n")
        (tmp_path / folder / f"{stem}.best_config").write_text(json.dumps(kept))

    kernel("ab", "cabc", "triton_poi_fused_gelu_view_9",
           {"XBLOCK": 1024, "num_warps": 4, "num_stages": 1, "configs_hash": "h", "found_by_coordesc": False,
            "time_taken_ms": 12, "triton_cache_hash": "t"})
    kernel("cd", "cdef", "triton_red_fused_mean_2", {"XBLOCK": 8, "R0_BLOCK": 128, "num_warps": 8})
    (tmp_path / "cd" / "cbroken.best_config").write_text("{not json")
    (tmp_path / "ef").mkdir()
    (tmp_path / "ef" / "corphan.best_config").write_text(json.dumps({"XBLOCK": 256}))
    assert G.runtime_tuned(str(tmp_path)) == [
        {"kernel": "corphan", "config": {"XBLOCK": 256}},  # no source beside it: its file's name
        {"kernel": "triton_poi_fused_gelu_view_9", "config": {"XBLOCK": 1024, "num_warps": 4, "num_stages": 1}},
        {"kernel": "triton_red_fused_mean_2", "config": {"XBLOCK": 8, "R0_BLOCK": 128, "num_warps": 8}}]
    assert G.runtime_tuned(str(tmp_path / "missing")) == []


def test_kernels_that_kept_another_config_than_default_are_named() -> None:
    def tuned(*rows: tuple[str, int]) -> dict[str, Any]:
        return result(1.0, 5.0, run="r1", runtime_tuned=[{"kernel": k, "config": {"XBLOCK": x}} for k, x in rows])

    default = tuned(("triton_poi_fused_gelu_view_7", 512), ("triton_poi_fused_gelu_view_8", 1024),
                    ("triton_red_fused_mean_2", 8))
    ours = tuned(("triton_poi_fused_gelu_view_9", 1024), ("triton_poi_fused_gelu_view_10", 1024),
                 ("triton_red_fused_mean_3", 8), ("triton_poi_fused_add_4", 64))
    assert G.retuned_versus(default, ours) == [{"kernel": "triton_poi_fused_gelu_view",
                                                "base": ['{"XBLOCK": 1024}', '{"XBLOCK": 512}'],
                                                "other": ['{"XBLOCK": 1024}', '{"XBLOCK": 1024}']}]
    profiled = G.report([("triton_poi_fused_gelu_view_7", 5.0)], 1, [])
    document = {"workloads": {"w": {"default": default | {"in_graph": profiled}, "ours": ours | {"in_graph": profiled}}}}
    lines = G.text(document).splitlines()
    assert "   runtime-tuned kernels that kept another config than default's: 1" in lines
    assert any(line.startswith("     triton_poi_fused_gelu_view: ") for line in lines)
    pinned = ours | {"in_graph": profiled, "default_tuned": {"restored": 3, "unchanged": 2, "rewritten": 1, "own": 4}}
    lines = G.text({"workloads": {"w": {"default": default | {"in_graph": profiled}, "ours+defaulttuned": pinned}}})
    assert ("   default's tuned configs put in place (+defaulttuned): 3; after the compile 2 as put, 1 tuned again, "
            "4 kernels tuned by this compile alone") in lines.splitlines()


def record(op: str, M: int, N: int, K: int, chosen: str = "aten", **benchmark: float) -> dict[str, Any]:
    return {"name": op.split("_")[0], "op": op, "chosen": chosen, "benchmark_ms": dict(benchmark),
            "shape": {"B": 1, "M": M, "N": N, "K": K, "M_dtype": "bfloat16"}}


def test_gemm_kernels_pair_with_the_lowered_gemms_in_order() -> None:
    call = [("nvjet_x_bias", 30.0), ("triton_poi_fused_gelu", 12.0), ("triton_tem_fused_addmm_1", 40.0),
            ("nvjet_x_bias", 34.0), ("fmha_kernel", 50.0)]
    records = [record("addmm_nt", 4096, 3072, 768, aten=0.040), record("addmm_nt", 4096, 768, 3072, "triton",
                                                                       triton=0.032, aten=0.041),
               record("addmm_nt", 4096, 3072, 768, aten=0.040)]
    records[0]["gated_ms"] = records[2]["gated_ms"] = 0.031
    out = G.report(call, 1, records)
    assert out["breakdown_us"] == {"gemm": 104.0, "attention": 50.0, "convolution": 0.0, "other_gemm": 0.0,
                                   "other": 12.0, "total": 166.0}
    first, second = out["problems"]
    assert first["problem"] == "addmm_nt 4096x3072x768 bfloat16" and first["count"] == 2 and first["ran"] == "aten"
    assert first["in_graph_us"] == pytest.approx(32.0) and first["isolated_us"] == pytest.approx(40.0)
    assert first["in_graph_over_isolated"] == pytest.approx(0.8) and first["gated_us"] == pytest.approx(31.0)
    assert second["ran"] == "triton" and second["isolated_us"] == pytest.approx(32.0) and second["gated_us"] is None
    assert second["in_graph_over_isolated"] == pytest.approx(1.25)
    assert [p["problem"] for p in G.disagreements(out["problems"])] == [first["problem"], second["problem"]]


class FakeOperand:
    """An operand of isolated_aten_ms's fake torch: only what it builds operands with."""

    def to(self, dtype: Any) -> FakeOperand:
        return self

    def transpose(self, a: int, b: int) -> FakeOperand:
        return self


def test_a_clock_that_stays_low_costs_one_problems_time_without_the_launch(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from matmul_toolkit_inductor import timing

    benchmarked: list[str] = []
    fake_torch = types.SimpleNamespace(
        bfloat16="bf16", device=lambda kind, index: (kind, index),
        cuda=types.SimpleNamespace(current_device=lambda: 0), randn=lambda shape, device: FakeOperand(),
        mm=lambda a, b: benchmarked.append("mm"), addmm=lambda bias, a, b: benchmarked.append("addmm"))
    benchmarking = types.ModuleType("torch._inductor.runtime.benchmarking")
    benchmarking.benchmarker = types.SimpleNamespace(  # type: ignore[attr-defined]
        benchmark_gpu=lambda fn: (fn(), 0.050)[1])
    for name in ("torch", "torch._inductor", "torch._inductor.runtime"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "torch._inductor.runtime.benchmarking", benchmarking)
    slow = {"clock": True}

    class Timer:
        def __init__(self, torch: Any, device: Any) -> None:
            pass

        def timed_runs(self, fn: Any) -> list[float]:
            fn()
            if benchmarked[-1] == "addmm" and slow["clock"]:
                raise timing.SlowClockError("timing: the GPU's SM clock stayed at 1462 MHz")
            return [0.032, 0.030, 0.031]

    monkeypatch.setattr(timing, "GatedTimer", Timer)
    records = [record("mm_nt", 64, 128, 256, aten=0.040), record("addmm_nt", 64, 128, 256),
               record("mm_nt", 64, 128, 256, "triton", triton=0.020)]
    cache: dict[str, Any] = {}
    suite.isolated_aten_ms(fake_torch, records, cache)
    assert records[0]["gated_ms"] == 0.030 and records[0]["benchmark_ms"] == {"aten": 0.040}
    assert records[1]["gated_ms"] is None and records[1]["benchmark_ms"] == {"aten": 0.050}
    assert "gated_ms" not in records[2]  # Triton ran there: no ATen call to time
    err = capsys.readouterr().err
    assert err.count("no time without the launch") == 1 and err.startswith("addmm_nt ")
    assert G.report([("nvjet_x", 3.0), ("nvjet_x_bias", 4.0)], 1, records[:2])["problems"][1]["gated_us"] is None
    # The next variant's profile times again only the problem that has no time yet.
    slow["clock"] = False
    benchmarked.clear()
    records = [record("mm_nt", 64, 128, 256), record("addmm_nt", 64, 128, 256)]
    suite.isolated_aten_ms(fake_torch, records, cache)
    assert benchmarked == ["addmm"] and records[1]["gated_ms"] == 0.030
    assert records[0]["benchmark_ms"] == {"aten": 0.050} and records[1]["benchmark_ms"] == {"aten": 0.050}


def test_every_variant_times_from_one_cpu_and_keeps_the_hosts_time_at_each_length(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The timed calls are issued from timing_cpu() (the same in every variant's process) until
    the profile, and host_times() gives each length's median host time a call over the rounds."""
    affinity = [{0, 1, 5, 3}]
    monkeypatch.setattr(suite.os, "sched_getaffinity", lambda pid: set(affinity[-1]), raising=False)
    monkeypatch.setattr(suite.os, "sched_setaffinity", lambda pid, cpus: affinity.append(set(cpus)), raising=False)
    assert suite.timing_cpu(affinity[0]) == 5
    monkeypatch.setattr(suite, "host_and_wall_us", lambda torch, call, calls: (300.0, 700.0))
    monkeypatch.setattr(suite, "dynamo_graphs", lambda torch: 0)
    monkeypatch.setattr(suite.ingraph, "runtime_tuned", lambda cache: {})
    monkeypatch.setattr(suite.ingraph, "generated_programs", lambda cache: {})
    runtime = types.ModuleType("torch._inductor.runtime.cache_dir_utils")
    runtime.cache_dir = lambda: str(tmp_path)  # type: ignore[attr-defined]
    for name in ("torch", "torch._inductor", "torch._inductor.runtime"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "torch._inductor.runtime.cache_dir_utils", runtime)
    clock = {"s": 0.0}  # the host's clock, moved by each call
    monkeypatch.setattr(suite.time, "perf_counter", lambda: clock["s"])

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            pass

        def record(self) -> None:
            pass

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, end: Any) -> float:
            return 1.0

    torch = types.SimpleNamespace(
        cuda=types.SimpleNamespace(Event=Event, synchronize=lambda: None),
        compiler=types.SimpleNamespace(cudagraph_mark_step_begin=lambda: None))
    w = W.by_name(["llama_dynamic"])[0]
    args = types.SimpleNamespace(calls=10, profile_calls=0, out=str(tmp_path / "out"))
    run = suite.VariantRun(torch, args, w, suite.parse_variant("default"))
    issue = {"128": 9e-3, "512": 9e-3}  # the probe's calls: slow, and no part of the rounds' host time
    run.calls = {length: (lambda length=length: clock.update(s=clock["s"] + issue[length])) for length in issue}
    for length in issue:
        run.probe(length)
    assert affinity[1:] == [{5}]  # pinned once
    # Three rounds a length, issued in 0.3, 0.5 and 0.2 ms a call at 128 tokens: median 0.3.
    for per_call in ({"128": 3e-4, "512": 1e-4}, {"128": 5e-4, "512": 1e-4}, {"128": 2e-4, "512": 4e-4}):
        issue.update(per_call)
        for length in issue:
            run.round(length, 10)
    assert run.host_times() == {"host_ms_by_length": {"128": pytest.approx(0.3), "512": pytest.approx(0.1)},
                                "timing_cpu": 5}
    # The profile runs on every CPU again.
    run.profile({})
    assert affinity[-1] == {0, 1, 5, 3}
    # Where pinning is refused, the calls are timed unpinned: said once, and no timing_cpu.

    def refuse(pid: int, cpus: set[int]) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(suite.os, "sched_setaffinity", refuse, raising=False)
    refused = suite.VariantRun(torch, args, w, suite.parse_variant("ours"))
    refused.calls = run.calls
    for length in issue:
        refused.probe(length)
    refused.round("128", 10)
    assert capsys.readouterr().err.count("timed calls not pinned to CPU 5") == 1
    assert "timing_cpu" not in refused.host_times() and "128" in refused.host_times()["host_ms_by_length"]


def test_a_dynamic_workload_is_profiled_at_the_length_its_gemms_were_lowered_at(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[str] = []
    cache = tmp_path / "cache"
    (cache / "ab").mkdir(parents=True)
    (cache / "ab" / "cabc.py").write_text("async_compile = AsyncCompile()\ndef call(args):\n    pass\n")
    (cache / "ab" / "kernel.py").write_text("@triton.jit\ndef triton_poi_fused_mul_0(in_ptr0):\n    pass\n")
    runtime = types.ModuleType("torch._inductor.runtime.cache_dir_utils")
    runtime.cache_dir = lambda: str(cache)  # type: ignore[attr-defined]
    for name in ("torch", "torch._inductor", "torch._inductor.runtime"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "torch._inductor.runtime.cache_dir_utils", runtime)
    monkeypatch.setattr(suite, "host_and_wall_us", lambda torch, call, calls: (call(), (300.0, 700.0))[1])
    monkeypatch.setattr(suite, "profiled_kernels", lambda torch, call, calls: (call(), [("nvjet_x", 0.0, 9.0)])[1])
    monkeypatch.setattr(suite, "isolated_aten_ms", lambda torch, records, cache: None)
    monkeypatch.setattr(suite, "dynamo_graphs", lambda torch: 1)
    w = W.by_name(["llama_dynamic"])[0]
    args = types.SimpleNamespace(calls=10, profile_calls=1, out=str(tmp_path / "out"))
    run = suite.VariantRun(None, args, w, suite.parse_variant("ours"))
    run.graphs_compiled = 1
    run.records = [record("mm_nt", 4 * w.seq, 2048, 2048)]
    # The other lengths' calls were added after the compile length's, but any order will do.
    run.calls = {str(seq): (lambda seq=seq: ran.append(str(seq))) for seq in reversed(w.lengths)}
    found, _ = run.profile({})
    assert set(ran) == {str(w.seq)} and found["profiled_length"] == w.seq
    assert found["in_graph"]["gemm_kernels"] == 1
    # The generated program (the wrapper, not a kernel's file) is kept to be diffed.
    kept = tmp_path / "out" / "llama_dynamic" / "code" / "ours"
    assert [p.name for p in kept.iterdir()] == ["cabc.py"]
    # A program that cannot be kept costs a line, not the profile.
    (kept.parent / "ours@graph").write_text("a file where the folder goes")
    run.v = suite.parse_variant("ours@graph")
    assert run.profile({})[0]["in_graph"]["gemm_kernels"] == 1
    assert "llama_dynamic: ours@graph: generated program not kept: " in capsys.readouterr().err
    # The report sets the profile against the timed ms of that length, not the lengths' geomean.
    result_ = result(2.0, 60.0) | found | {"ms_by_length": {str(w.seq): 0.010, "512": 4.0},
                                           "host_ms_by_length": {str(w.seq): 0.0096, "512": 0.4}}
    lines = G.text({"workloads": {"llama_dynamic": {"ours": result_}}}).splitlines()
    assert lines[0] == f"== llama_dynamic / ours: 0.010 ms a call at {w.seq} tokens"
    assert lines[1] == (f"   in the timed rounds the host issued a call in 0.010 of 0.010 ms at {w.seq} tokens "
                        "(the host sets the pace), 0.400 of 4.000 ms at 512 tokens")
    assert lines[3].startswith("   the timed call 1.0 µs beyond the profiled kernels (10.0% of it)")
    # A result with host times and no profile still shows them.
    unprofiled = {"ms": 2.0, "ms_by_length": {"128": 1.0}, "host_ms_by_length": {"128": 0.5}}
    assert G.text({"workloads": {"llama_dynamic": {"ours": unprofiled}}}).splitlines()[1:] == [
        "   in the timed rounds the host issued a call in 0.500 of 1.000 ms at 128 tokens",
        "   no in-graph report (not profiled)"]


def test_unpaired_gemm_kernels_are_reported_by_name() -> None:
    out = G.report([("nvjet_x", 3.0), ("nvjet_x", 4.0)], 1, [record("mm", 8, 8, 8)])
    assert "2 GEMM kernels in a call against 1 GEMMs lowered" in out["unattributed"]
    assert out["gemm_kernels_by_name"] == {"nvjet_x": {"count": 2, "total_us": 7.0}}
    assert "error" in G.report([("a", 1.0)], 2, [])


def in_graph(call: list[tuple[str, float]], records: list[dict[str, Any]]) -> dict[str, Any]:
    return G.report(call, 1, records)


def test_a_variant_is_judged_against_defaults_cublas_in_the_graph() -> None:
    shapes = [record("mm_nt", 3152, 2304, 768), record("addmm_nt", 3152, 768, 768), record("mm", 64, 512, 1)]
    base = in_graph([("nvjet_a", 18.0), ("triton_poi_fused_ln_0", 10.0), ("nvjet_b_bias", 8.0),
                     ("cutlass::Kernel2<sgemm>", 3.0)], shapes)
    # Triton on all three: 1.5x slower on the first (its template fused the layer norm, whose
    # kernel is gone), within 5 % on the second, faster on the rotary mm.
    other = in_graph([("triton_tem_fused_mm_ln_0", 27.0), ("triton_tem_fused_addmm_1", 8.2),
                      ("triton_tem_fused_mm_2", 1.8)], shapes)
    against = G.versus(base, other)
    assert against is not None
    assert against["delta_us"]["gemm"] == pytest.approx(37.0 - 29.0)
    assert against["delta_us"]["other"] == pytest.approx(-10.0) and against["delta_us"]["total"] == pytest.approx(-2.0)
    assert against["triton_gemms"] == 3 and against["gemms"] == 3
    assert [r["problem"] for r in against["faster"]] == ["mm 64x512x1 bfloat16"]
    assert [r["problem"] for r in against["slower"]] == ["mm_nt 3152x2304x768 bfloat16"]
    assert sum(r["saved_us"] for r in against["faster"]) == pytest.approx(1.2)
    assert against["slower"][0]["ratio"] == pytest.approx(1.5)
    # Not attributed on either side: no comparison.
    assert G.versus(base, G.report([("nvjet_x", 1.0)], 1, shapes)) is None


def test_triton_wins_names_each_problem_once_or_says_none_won() -> None:
    shapes = [record("bmm", 256, 256, 64), record("mm_nt", 1024, 1024, 1024)]
    base = in_graph([("cutlass::Kernel2<sgemm>", 60.0), ("nvjet_a", 20.0)], shapes)

    def run1(ms: float, report_: dict[str, Any], run: str = "r1") -> dict[str, Any]:
        return result(ms, 5.0, in_graph=report_, run=run)

    document = {"workloads": {
        "bert": {"default": run1(1.0, base),
                 "ours": run1(0.9, in_graph([("triton_tem_fused_bmm_0", 48.0), ("nvjet_a", 20.0)], shapes)),
                 "max_autotune": run1(1.1, in_graph([("triton_tem_fused_bmm_0", 45.0),
                                                     ("triton_tem_fused_mm_1", 30.0)], shapes))},
        # within 10 % of cuBLAS is no win; a profile of another run is not set against default
        "vit": {"default": run1(1.0, base),
                "max_autotune": run1(1.3, in_graph([("triton_tem_fused_bmm_0", 56.0),
                                                    ("triton_tem_fused_mm_1", 30.0)], shapes)),
                "table": run1(1.0, in_graph([("triton_tem_fused_bmm_0", 10.0), ("nvjet_a", 20.0)], shapes),
                              run="r2")},
        "gpt2": {"default": run1(1.0, base), "ours": run1(1.0, base)},
        # only another run ran Triton: set against default all the same, and said so
        "swin": {"default": run1(1.0, base),
                 "table": run1(1.0, in_graph([("triton_tem_fused_bmm_0", 10.0), ("nvjet_a", 20.0)], shapes),
                               run="r2")},
    }}
    wins = G.triton_wins(document)
    assert [(r["problem"], r["variant"]) for r in wins["bert"]] == [("bmm 256x256x64 bfloat16", "max_autotune")]
    assert wins["bert"][0]["saved_us"] == pytest.approx(15.0)
    assert wins["vit"] == [] and wins["gpt2"] is None and wins["swin"] is None
    assert [r["variant"] for r in G.triton_wins(document, any_run=True)["swin"]] == ["table"]
    # ours' bmm (48 against 60 µs) took 12 of the 15 µs that the best Triton pick saved
    room = G.headroom(document["workloads"]["bert"], wins["bert"])
    assert room == {"us": pytest.approx(15.0), "share": pytest.approx(0.015), "ours_us": pytest.approx(12.0)}
    text = G.text(document)
    assert ("   bert                 faster on 1, 15.0 µs a call = 1.50% of default's call, ours saved 12.0: "
            "bmm 256x256x64 bfloat16 (max_autotune, 15.0 µs)") in text
    assert "   vit                  no Triton choice ran faster than cuBLAS" in text
    assert ("   swin                 faster on 1, 50.0 µs a call = 5.00% of default's call "
            "(Triton of other runs than default's): bmm 256x256x64 bfloat16 (table, 50.0 µs)") in text
    assert "   gpt2 " not in text
    assert "Triton slower than default's cuBLAS by more than 10% on 1 problem(s): 10.0 µs a call lost" in text
    assert "   not set against default: measured in another run than default's" in text


def test_picks_are_judged_by_max_autotunes_triton_against_defaults_cublas() -> None:
    shapes = [record("bmm", 256, 256, 64), record("mm_nt", 1024, 1024, 1024), record("mm_nt", 8, 4096, 4096)]
    base = in_graph([("cutlass::Kernel2<sgemm>", 60.0), ("nvjet_a", 20.0), ("nvjet_b", 10.0)], shapes)
    autotuned = in_graph([("triton_tem_fused_bmm_0", 45.0), ("triton_tem_fused_mm_1", 30.0),
                          ("triton_tem_fused_mm_2", 9.5)], shapes)

    def workload(ours_kernels: list[tuple[str, float]], run: str = "r1") -> dict[str, Any]:
        return {"default": result(1.0, 5.0, run="r1", in_graph=base),
                "ours": result(1.0, 5.0, run=run, in_graph=in_graph(ours_kernels, shapes)),
                "max_autotune": result(1.2, 90.0, run="r1", in_graph=autotuned)}

    document = {"workloads": {
        # Triton for the bmm (0.75x), cuBLAS for the mm (1.5x): right; the last is within 10 %.
        "right": workload([("triton_tem_fused_bmm_0", 45.0), ("nvjet_a", 20.0), ("nvjet_b", 10.0)]),
        "wrong": workload([("cutlass::Kernel2<sgemm>", 60.0), ("triton_tem_fused_mm_1", 30.0),
                           ("triton_tem_fused_mm_2", 9.5)]),
        "apart": workload([("triton_tem_fused_bmm_0", 45.0), ("nvjet_a", 20.0), ("nvjet_b", 10.0)], run="r2"),
    }}
    judged = G.judge_picks(document)
    assert set(judged) == {"right", "wrong"}
    assert {k: judged["right"][k] for k in ("problems", "agree", "triton", "aten", "either")} == \
        {"problems": 3, "agree": 3, "triton": 1, "aten": 1, "either": 1}
    assert judged["wrong"]["agree"] == 1
    assert [(w["problem"], w["picked"]) for w in judged["wrong"]["wrong"]] == [
        ("bmm 256x256x64 bfloat16", "aten"), ("mm_nt 1024x1024x1024 bfloat16", "triton")]
    text = G.text(document)
    assert "   right                agree on 3 of 3 (Triton faster 1, cuBLAS faster 1, within 10% 1)" in text
    assert "   all                  agree on 4 of 6" in text


# ------------------------------------------------------------------------ resume (parent)
FAKE_CHILD = textwrap.dedent("""
    import json, os, sys
    args = sys.argv[1:]
    name, record = args[args.index("--child") + 1], args[args.index("--record") + 1]
    variants = args[args.index("--variants") + 1: args.index("--out")]
    out = args[args.index("--out") + 1]
    if os.environ.get("FAIL") == name:
        sys.exit(3)
    M = {"llama_prefill": 2048, "bert_base": 4096}.get(name, 64)
    shape = {"version": 1, "B": 1, "M": M, "M_dtype": "bfloat16", "N": 768, "K": 768, "K_dtype": "bfloat16",
             "out_dtype": "bfloat16", "out_size": [1, M, 768], "out_stride": [M * 768, 768, 1]}
    json.dump({"operations": {"mm_nt": {"shapes": [shape]}}}, open(os.path.join(out, name, "shapeset.json"), "w"))
    with open(os.environ["RUNS"], "a") as f:
        f.write(name + ("" if os.environ.get("SHOW_VARIANTS") is None else ":" + ",".join(variants)) + "\\n")
    if os.environ.get("FAIL_AFTER_DEFAULT") == name:  # the process dies after its first variant
        json.dump({"variants": {"default": {"ms": 9.0, "compile_s": 9.0}}}, open(record, "w"))
        sys.exit(4)
    json.dump({"description": name, "environment": {"device": "Fake GPU", "torch": "0"},
               "variants": {v: {"ms": 1.0 + len(v) / 100, "compile_s": 2.0} for v in variants}}, open(record, "w"))
""")


@pytest.fixture
def fake_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    child = tmp_path / "child.py"
    child.write_text(FAKE_CHILD)
    runs = tmp_path / "runs.txt"
    runs.write_text("")
    monkeypatch.setenv("RUNS", str(runs))
    original = suite.child_command

    def command(args: Any, w: Any, variants: Any, record: str) -> list[str]:
        return [sys.executable, str(child)] + original(args, w, variants, record)[2:]

    monkeypatch.setattr(suite, "child_command", command)
    results = tmp_path / "results.json"

    def run(*extra: str) -> int:
        return suite.main(["--results", str(results), "--out", str(tmp_path / "out"),
                           "--shapeset", str(tmp_path / "suite_shapes.json"),
                           "--variants", "default", "max_autotune", *extra])

    return run, results, runs


def test_the_parent_resumes_where_it_stopped(fake_suite: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    run, results, runs = fake_suite
    monkeypatch.setenv("FAIL", "bert_base")
    assert run("--workloads", "llama_prefill", "bert_base") == 1
    document = json.loads(results.read_text())
    assert document["device"] == "Fake GPU" and document["torch"] == "0"
    assert document["workloads"]["llama_prefill"]["default"] == {"ms": 1.07, "compile_s": 2.0}
    assert "exit 3" in document["workloads"]["bert_base"]["default"]["error"]
    assert runs.read_text().split() == ["llama_prefill"]
    # The next run measures only what failed; --fresh measures everything again.
    monkeypatch.delenv("FAIL")
    assert run("--workloads", "llama_prefill", "bert_base") == 0
    assert runs.read_text().split() == ["llama_prefill", "bert_base"]
    assert run("--workloads", "llama_prefill", "bert_base") == 0
    assert runs.read_text().split() == ["llama_prefill", "bert_base"]
    assert run("--workloads", "bert_base", "--fresh") == 0
    assert runs.read_text().split() == ["llama_prefill", "bert_base", "bert_base"]
    summary = json.loads(results.read_text())["summary"]
    assert summary["max_autotune"]["measured"] == 2
    # The suite's shapeset holds each workload's GEMMs once.
    shapes = json.loads((results.parent / "suite_shapes.json").read_text())["operations"]["mm_nt"]["shapes"]
    assert [s["M"] for s in shapes] == [2048, 4096]


def test_a_missing_variant_runs_beside_a_default_that_leaves_the_paired_one_in_place(
        fake_suite: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    run, results, runs = fake_suite
    paired = {"default": {"ms": 1.23, "compile_s": 4.1, "run": "a"},
              "max_autotune_gemm": {"ms": 1.16, "compile_s": 40.2, "run": "a"}}
    results.write_text(json.dumps({"workloads": {"bert_base": paired}}))
    monkeypatch.setenv("SHOW_VARIANTS", "1")
    assert run("--workloads", "bert_base", "--variants", "default", "max_autotune_gemm", "max_autotune") == 0
    assert runs.read_text().split() == ["bert_base:default,max_autotune"]
    kept = json.loads(results.read_text())["workloads"]["bert_base"]
    assert kept["default"] == paired["default"] and kept["max_autotune_gemm"] == paired["max_autotune_gemm"]
    assert kept["max_autotune"]["ms"] == pytest.approx(1.12)


def test_the_report_prints_each_variants_in_graph_gemms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    call = [("nvjet_x_bias", 30.0), ("triton_poi_fused_gelu", 12.0)]
    document = {"workloads": {"bert_base": {"default": result(1.0, 5.0, in_graph=G.report(
        call, 1, [record("addmm_nt", 4096, 3072, 768, aten=0.040)]))}}}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(document))
    assert suite.main(["--report", "--results", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "== bert_base / default: 1.000 ms a call"
    assert out[1].startswith("   device µs a call: gemm 30.0, attention 0.0")
    assert out[2] == "   the timed call 958.0 µs beyond the profiled kernels (95.8% of it)"
    assert "addmm_nt 4096x3072x768 bfloat16" in out[3] and "in graph     30.0 µs, isolated     40.0 µs (0.75x !)" in out[3]
    document["workloads"]["bert_base"]["default"]["cudagraph_skips"] = 2
    path.write_text(json.dumps(document))
    assert suite.main(["--report", "--results", str(path)]) == 0
    assert capsys.readouterr().out.splitlines()[2].endswith("; 2 graph(s) skipped by CUDA graphs")
    # The host's issue time beside the wall time: near it, the host sets the pace.
    for host, paced in ((400.0, False), (950.0, True)):
        document["workloads"]["bert_base"]["default"] |= {"host_us_a_call": host, "wall_us_a_call": 1000.0}
        path.write_text(json.dumps(document))
        assert suite.main(["--report", "--results", str(path)]) == 0
        line = capsys.readouterr().out.splitlines()[2]
        assert f"; the host issues a call in {host:.0f} of its 1000 µs" in line
        assert line.endswith("(the host sets the pace)") == paced
    # A profile slower than the timed call (the profiler's overhead) gives no idle time.
    document["workloads"]["bert_base"]["default"]["ms"] = 0.01
    path.write_text(json.dumps(document))
    assert suite.main(["--report", "--results", str(path)]) == 0
    assert "took longer than the timed call" in capsys.readouterr().out.splitlines()[2]


def test_a_variant_not_yet_measured_runs_with_a_default_of_its_own(fake_suite: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    run, results, runs = fake_suite
    monkeypatch.setenv("SHOW_VARIANTS", "1")
    assert run("--workloads", "vit_b_16") == 0
    assert run("--workloads", "vit_b_16", "--variants", "default", "max_autotune", "max_autotune_gemm") == 0
    assert runs.read_text().split() == ["vit_b_16:default,max_autotune", "vit_b_16:default,max_autotune_gemm"]
    assert set(json.loads(results.read_text())["workloads"]["vit_b_16"]) == {"default", "max_autotune",
                                                                            "max_autotune_gemm"}


def test_a_run_that_dies_keeps_what_it_finished_and_loses_nothing_measured_before(
        fake_suite: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    run, results, runs = fake_suite
    assert run("--workloads", "bert_base") == 0
    monkeypatch.setenv("FAIL_AFTER_DEFAULT", "bert_base")
    assert run("--workloads", "bert_base", "--fresh") == 1
    kept = json.loads(results.read_text())["workloads"]["bert_base"]
    assert kept["default"] == {"ms": 9.0, "compile_s": 9.0}  # the new run's finished variant
    assert kept["max_autotune"]["ms"] == pytest.approx(1.12)  # not replaced by the failure


def test_the_budget_starts_no_workload_after_it(fake_suite: Any) -> None:
    run, results, runs = fake_suite
    assert run("--workloads", "llama_prefill", "bert_base", "--budget", "1e-9") == 0
    assert runs.read_text().split() == ["llama_prefill"]


def test_the_budget_leaves_a_workload_expected_to_outlast_it_and_goes_on(fake_suite: Any) -> None:
    run, results, runs = fake_suite
    # vit_b_16's max-autotune compiled for 1000 s last time: it cannot end inside 100 s, while
    # bert_base (nothing known: the medians of its variants' compile times elsewhere, 2 s) can.
    cheap = {"default": result(1.0, 2.0), "max_autotune": result(1.2, 2.0)}
    results.write_text(json.dumps({"workloads": {
        "vit_b_16": {"default": result(1.0, 10.0), "max_autotune": result(1.2, 1000.0)},
        "gpt2_prefill": cheap, "t5_small": cheap}}))
    assert run("--workloads", "llama_prefill", "vit_b_16", "bert_base", "--fresh", "--budget", "100") == 0
    assert runs.read_text().split() == ["llama_prefill", "bert_base"]
    vit = [suite.parse_variant("default"), suite.parse_variant("max_autotune")]
    document = json.loads(results.read_text())
    assert suite.expected_seconds(document, "vit_b_16", vit) == pytest.approx(suite.WORKLOAD_OVERHEAD_S + 1010.0)
    assert suite.expected_seconds(document, "mistral_decode", vit) == pytest.approx(suite.WORKLOAD_OVERHEAD_S + 4.0)


def test_a_workload_stopped_unfinished_is_expected_to_take_longer_than_it_ran(fake_suite: Any,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    run, results, runs = fake_suite
    stopped = {"ms": None, "compile_s": None, "error": "workload process interrupted", "process_s": 500.0}
    results.write_text(json.dumps({"workloads": {"t5_small": {"default": result(1.0, 2.0), "max_autotune": stopped}}}))
    both = [suite.parse_variant("default"), suite.parse_variant("max_autotune")]
    assert suite.expected_seconds(json.loads(results.read_text()), "t5_small", both) == pytest.approx(
        500.0 + suite.WORKLOAD_OVERHEAD_S)
    # t5_small comes first but cannot fit in 100 s; bert_base can, and goes first instead.
    assert run("--workloads", "t5_small", "bert_base", "--budget", "100") == 0
    assert runs.read_text().split() == ["bert_base"]
    # Where nothing fits, the first starts all the same; a process that dies says how long it ran.
    monkeypatch.setenv("FAIL", "t5_small")
    assert run("--workloads", "t5_small", "--budget", "1") == 1
    assert runs.read_text().split() == ["bert_base"]  # the fake died before it logged
    entry = json.loads(results.read_text())["workloads"]["t5_small"]["max_autotune"]
    assert "exit 3" in entry["error"] and entry["process_s"] >= 0


def test_a_stopped_workload_that_resumes_its_autotuning_is_expected_to_take_its_usual_time(
        fake_suite: Any, tmp_path: Path) -> None:
    run, results, runs = fake_suite
    stopped = {"ms": None, "compile_s": None, "error": "workload process interrupted", "process_s": 500.0}
    results.write_text(json.dumps({"workloads": {"t5_small": {"default": result(1.0, 2.0), "max_autotune": stopped},
                                                 "bert_base": {"max_autotune": result(1.0, 30.0)}}}))
    state = tmp_path / "out" / "autotune_state" / "t5_small.max_autotune.json"
    state.parent.mkdir(parents=True)
    state.write_text("{}")
    # t5_small's earlier attempt left its timings: after bert_base it still fits the budget,
    # where the 500 s its stopped process ran would not.
    assert run("--workloads", "t5_small", "bert_base", "--variants", "default", "max_autotune", "--fresh",
               "--budget", "200") == 0
    assert runs.read_text().split() == ["bert_base", "t5_small"]


def test_compile_phases_are_the_seconds_spent_between_two_readings() -> None:
    before = {"compile_fx_inner": 1.0, "async_compile.wait": 2.0, "GraphLowering.run": 0.5}
    after = {"compile_fx_inner": 4.0, "async_compile.wait": 2.01, "GraphLowering.run": 1.5, "Scheduler.__init__": 0.2}
    assert list(suite.phase_difference(before, after).items()) == [
        ("compile_fx_inner", 3.0), ("GraphLowering.run", 1.0), ("Scheduler.__init__", 0.2)]


def test_bad_input_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert suite.main(["--results", str(bad), "--variants", "default", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {bad}: cannot read the results")
    assert suite.main(["--variants", "table", "--out", str(tmp_path)]) == 2
    assert "error: --mmt: the table variants need" in capsys.readouterr().err
    assert suite.main(["--variants", "table", "--table", str(tmp_path / "none.json"), "--out", str(tmp_path)]) == 2
    assert f"error: {tmp_path / 'none.json'}: no such table file (--table)" in capsys.readouterr().err
    # --table serves the default policy only: another policy's table is still exported
    assert suite.main(["--variants", "table@isolated", "--table", str(bad), "--out", str(tmp_path)]) == 2
    assert "error: --mmt: the table variants need" in capsys.readouterr().err
    assert suite.main(["--workloads", "nope", "--variants", "default", "--out", str(tmp_path)]) == 2
    assert "error: --workloads: unknown workload nope" in capsys.readouterr().err
    assert suite.main(["--autotune-state", str(bad), "--variants", "default", "--out", str(tmp_path)]) == 2
    assert f"error: --autotune-state: {bad} is not a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        suite.main(["--budget", "-5", "--list"])
    assert stopped.value.code == 2 and "--budget must be 0 or more" in capsys.readouterr().err


@pytest.mark.parametrize("gpu", ["h200", "h100"])
def test_the_committed_results_follow_the_documented_format(gpu: str) -> None:
    path = SUITE_DIR / f"results_{gpu}.json"
    if not path.exists():
        pytest.skip(f"bench/models/results_{gpu}.json not measured yet")
    document = json.loads(path.read_text())
    assert isinstance(document["device"], str) and gpu.upper() in document["device"]
    assert isinstance(document["torch"], str)
    for name, variants in document["workloads"].items():
        W.by_name([name])
        for variant, r in variants.items():
            parsed = suite.parse_variant(variant)
            if S.usable(r):
                assert r["ms"] > 0 and r["compile_s"] > 0
            if "compile_kwargs" in r:  # compiled as its name says today (a renamed variant's results follow it)
                assert json.loads(r["compile_kwargs"]) == parsed.compile_kwargs(), (name, variant)
            if gpu != "h200" and parsed.base == "ours":  # the shipped model is an H200's
                assert "this GPU is" in r["model_forced"]


def test_forcing_the_model_onto_another_gpu_reaches_every_variants_process(tmp_path: Path) -> None:
    args = suite.parse_args(["--variants", "default", "ours", "--force-model", "--out", str(tmp_path)])
    command = suite.child_command(args, W.by_name(["bert_base"])[0], args.parsed_variants, "record.json")
    assert "--force-model" in command
    assert suite.parse_args(["--out", str(tmp_path)]).force_model is False
    compiles = suite.parse_args(["--compiles", "3", "--out", str(tmp_path)])
    command = suite.child_command(compiles, W.by_name(["bert_base"])[0], compiles.parsed_variants, "record.json")
    assert command[command.index("--compiles") + 1] == "3"


def test_a_table_exported_elsewhere_serves_the_default_policy_in_every_workload(tmp_path: Path) -> None:
    table = tmp_path / "lut.json"
    table.write_text("{}")
    args = suite.parse_args(["--variants", "default", "table", "--table", str(table), "--out", str(tmp_path)])
    assert suite.check_inputs(args)  # no --mmt needed
    command = suite.child_command(args, W.by_name(["bert_base"])[0], args.parsed_variants, "record.json")
    assert command[command.index("--table") + 1] == str(table)
    tables: dict[Optional[str], str] = {}
    record: dict[str, Any] = {}
    suite.make_tables(args, W.by_name(["bert_base"])[0], str(tmp_path), tables, record)
    assert tables == {None: str(table)} and "export_s" not in record


def test_the_suite_on_a_gpu(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed: the suite runs on the GPU machine")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the suite runs on the GPU machine (bench/models/suite.py)")
    pytest.importorskip("transformers", reason="transformers is not installed")
    results = tmp_path / "results.json"
    assert suite.main(["--workloads", "bert_base", "--variants", "default", "--rounds", "1", "--calls", "2",
                       "--results", str(results), "--out", str(tmp_path)]) == 0
    assert S.usable(json.loads(results.read_text())["workloads"]["bert_base"]["default"])


def test_variants_of_different_runs_compare_through_their_own_defaults() -> None:
    results = {"default": result(2.0, 10.0, run="new", default_ms=2.0, default_compile_s=10.0),
               "ours": result(1.9, 12.0, run="new", default_ms=2.0, default_compile_s=10.0),
               # an older run on a machine 10 % slower: its default took 2.2 ms
               "max_autotune": result(2.31, 99.0, run="old", default_ms=2.2, default_compile_s=11.0)}
    assert S.compare(results, "ours", "default") == {"speed": pytest.approx(2.0 / 1.9),
                                                     "compile": pytest.approx(1.2)}
    vs = S.compare(results, "ours", "max_autotune")
    assert vs["speed"] == pytest.approx((2.31 / 2.2) / (1.9 / 2.0))
    assert vs["compile"] == pytest.approx((12.0 / 10.0) / (99.0 / 11.0))
    del results["max_autotune"]["default_ms"]  # nothing to normalise by: the times as they are
    assert S.compare(results, "ours", "max_autotune")["speed"] == pytest.approx(2.31 / 1.9)


def test_each_variant_is_stamped_with_its_runs_default() -> None:
    variants = {"default": result(2.0, 10.0), "ours": result(1.5, 11.0), "max_autotune": {"error": "x"}}
    suite.stamp_run(variants, "host-1-20261201T000000Z")
    assert all(v["run"] == "host-1-20261201T000000Z" for v in variants.values())
    assert variants["ours"]["default_ms"] == 2.0 and variants["max_autotune"]["default_compile_s"] == 10.0


def test_each_runs_environment_is_kept_beside_the_latest() -> None:
    document: dict[str, Any] = {"workloads": {}}
    first = {"variants": {"default": {"ms": 1.0, "compile_s": 2.0, "run": "a"}}}
    second = {"variants": {"ours": {"ms": 0.9, "compile_s": 1.0, "run": "b"}}}
    suite.merge(document, "llama_prefill", first, {"torch": "2.10", "toolkit_commit": "1111111"})
    suite.merge(document, "llama_prefill", second, {"torch": "2.11", "toolkit_commit": "2222222"})
    assert document["torch"] == "2.11" and set(document["workloads"]["llama_prefill"]) == {"default", "ours"}
    assert document["runs"] == {"a": {"torch": "2.10", "toolkit_commit": "1111111"},
                                "b": {"torch": "2.11", "toolkit_commit": "2222222"}}


def test_a_companion_default_keeps_the_default_that_kept_variants_were_timed_beside() -> None:
    """A later run of max_autotune alone (default beside it as its reference) must not take away
    the default that ours was paired with; it replaces a default no kept variant shares."""
    def document() -> dict[str, Any]:
        return {"workloads": {"bert_base": {"default": {"ms": 1.23, "compile_s": 4.1, "run": "a"},
                                            "ours": {"ms": 1.16, "compile_s": 4.2, "run": "a"}},
                              "gpt2_prefill": {"default": {"ms": 1.57, "compile_s": 6.2, "run": "a"}}}}
    later = {"variants": {"default": {"ms": 1.25, "compile_s": 7.6, "run": "b"},
                          "max_autotune": {"ms": 1.27, "compile_s": 118.0, "run": "b", "default_ms": 1.25}}}
    doc = document()
    suite.merge(doc, "bert_base", later, {}, companion=True)
    kept = doc["workloads"]["bert_base"]
    assert kept["default"]["run"] == "a" and kept["max_autotune"]["run"] == "b"
    assert S.compare(kept, "ours", "default")["speed"] == pytest.approx(1.23 / 1.16)
    suite.merge(doc, "gpt2_prefill", later, {}, companion=True)  # nothing else of run a: replaced
    assert doc["workloads"]["gpt2_prefill"]["default"]["run"] == "b"
    doc = document()
    suite.merge(doc, "bert_base", later, {})  # default asked for (--fresh): the new one counts
    assert doc["workloads"]["bert_base"]["default"]["run"] == "b"
    doc = document()
    suite.merge(doc, "bert_base", {"variants": {**later["variants"], "ours": {"ms": 1.15, "compile_s": 4.0,
                                                                          "run": "b"}}}, {}, companion=True)
    assert doc["workloads"]["bert_base"]["default"]["run"] == "b"  # ours measured again beside it


# ------------------------------------------------------------------------------- timing
def test_a_round_runs_enough_calls_to_last_round_ms() -> None:
    assert suite.calls_per_round(0.4, 10, 25.0) == 63  # a decode step
    assert suite.calls_per_round(2.0, 10, 25.0) == 13
    assert suite.calls_per_round(5.0, 10, 25.0) == 10  # never fewer than asked
    assert suite.calls_per_round(0.0, 10, 25.0) == 10
    assert suite.calls_per_round(0.4, 10, 0.0) == 10


def test_timed_round_divides_the_events_time_by_the_calls() -> None:
    """A fake CUDA clock: every call takes 0.5 ms of device time."""
    clock = {"ms": 0.0, "calls": 0}

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            self.at = 0.0

        def record(self) -> None:
            self.at = clock["ms"]

        def synchronize(self) -> None:
            pass

        def elapsed_time(self, end: Any) -> float:
            return end.at - self.at

    def call() -> None:
        clock["ms"] += 0.5
        clock["calls"] += 1

    torch = types.SimpleNamespace(
        cuda=types.SimpleNamespace(Event=Event, synchronize=lambda: None),
        compiler=types.SimpleNamespace(cudagraph_mark_step_begin=lambda: None))
    assert suite.timed_round(torch, call, 40) == pytest.approx(0.5)
    assert clock["calls"] == 40


class FakeTimer:
    """A variant whose calls take `ms`, slowed by `drift` ms for every round run so far by
    anyone (a GPU that heats up), writing what it runs to a shared log."""

    def __init__(self, name: str, ms: float, log: list[tuple[str, int]], fail_at: int = -1) -> None:
        self.name, self.ms, self.log, self.fail_at = name, ms, log, fail_at

    def probe(self) -> float:
        return self.ms

    def round(self, calls: int) -> float:
        if len(self.log) == self.fail_at:
            raise suite.VariantFailed(f"the {self.name} process died (exit code -9)")
        self.log.append((self.name, calls))
        return self.ms + 0.01 * len(self.log)


def test_interleaved_rounds_take_turns_in_a_rotating_order() -> None:
    log: list[tuple[str, int]] = []
    timers = {name: FakeTimer(name, ms, log) for name, ms in (("default", 0.4), ("ours", 2.0), ("table", 5.0))}
    times, failed = suite.interleaved_rounds(timers, rounds=3, fewest=10, round_ms=25.0)
    assert failed == {}
    assert [name for name, _ in log] == ["default", "ours", "table", "ours", "table", "default",
                                         "table", "default", "ours"]
    assert {name: calls for name, calls in log} == {"default": 63, "ours": 13, "table": 10}
    # A steady drift costs every variant the same on the whole: each runs once at every
    # position of the rotation.
    drift = {name: sum(t) - 3 * timers[name].ms for name, t in times.items()}
    assert drift["default"] == pytest.approx(drift["ours"]) == pytest.approx(drift["table"])


def test_a_variant_that_fails_while_timed_drops_out_and_the_others_go_on() -> None:
    log: list[tuple[str, int]] = []
    timers = {"default": FakeTimer("default", 1.0, log), "ours": FakeTimer("ours", 1.0, log, fail_at=2)}
    times, failed = suite.interleaved_rounds(timers, rounds=3, fewest=10, round_ms=0.0)
    assert failed == {"ours": "the ours process died (exit code -9)"}
    assert len(times["default"]) == 4 and len(times["ours"]) == 1  # 3 rounds, rounded up to 2 turns


class FakeVariantProcess:
    """A variant process's handle, in this process: it answers as variant_main does, and
    logs every request."""

    log: list[str] = []
    closed: list[str] = []
    given: dict[str, Any] = {}

    def __init__(self, args: Any, w: Any, v: Any) -> None:
        self.name, self.pending = v.name, None
        FakeVariantProcess.log.append(f"start {v.name}")

    def send(self, what: str, *params: Any) -> None:
        FakeVariantProcess.log.append(f"{what} {self.name}")
        if what == "compile":
            FakeVariantProcess.given[self.name] = params[1]  # default's tuned configs, once it compiled
        self.pending = (what, params)

    def reply(self) -> Any:
        what, params = self.pending
        if what == "prepare":
            if self.name == "max_autotune_gemm":
                raise suite.VariantFailed("the max_autotune_gemm process died (exit code -9)")
            return None
        if what == "eager_call_ms":
            return 7.0
        if what == "compile":
            if self.name == "max_autotune":
                raise suite.VariantFailed("RuntimeError: out of memory")
            result = {"ms": None, "compile_s": 3.0 if self.name.startswith("default") else 4.0}
            if self.name == "ours~3":
                result["compile_s"] = 6.0
            if self.name == "table@isolated":
                result["error"] = "wrong result: relative error 5.0e-01 against eager"
            return {"result": result, "environment": {"device": "Fake GPU"}, "gemm_problems": 2,
                    **({"tuned_files": {"ab/k.best_config": '{"XBLOCK": 512}'}} if self.name == "default" else {})}
        if what == "probe":
            return 1.0
        if what == "round":
            times = {"ours": 0.9, "ours~2": 0.8, "ours~3": 1.2}
            return times.get(self.name, 1.0 if self.name.startswith("default") else 1.1)
        if what == "host_times":
            hosts = {"ours": 0.5, "ours~2": 0.4, "ours~3": 0.7}
            return {"host_ms_by_length": {"128": hosts.get(self.name, 0.3)}, "timing_cpu": 15}
        if what == "profile":
            FakeVariantProcess.log.append(f"report {self.name} {params[1]}")
            cache = dict(params[0])
            cache[self.name] = (1.0, 1.0)
            return {"in_graph": {"seen": sorted(cache)}}, cache
        raise AssertionError(what)

    def request(self, what: str, *params: Any) -> Any:
        self.send(what, *params)
        return self.reply()

    def close(self) -> None:
        FakeVariantProcess.closed.append(self.name)


def test_the_workload_process_compiles_each_variant_alone_then_times_them_together(tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    args = suite.parse_args(["--child", "bert_base", "--record", str(record), "--out", str(tmp_path),
                             "--variants", "ours", "max_autotune", "max_autotune_gemm", "table@isolated"])
    FakeVariantProcess.log, FakeVariantProcess.closed = [], []
    assert suite.child_main(args, start=FakeVariantProcess) == 0
    document = json.loads(record.read_text())
    variants = document["variants"]
    log = FakeVariantProcess.log
    names = ["default", "ours", "max_autotune", "max_autotune_gemm", "table@isolated"]
    # Every process starts and prepares at once; then they compile one at a time, the default
    # first, and its eager call is timed before its compile.
    assert log[:10] == [x for name in names for x in (f"start {name}", f"prepare {name}")]
    assert [x for x in log if x.startswith(("compile", "eager"))] == [
        "eager_call_ms default", "compile default", "compile ours", "compile max_autotune", "compile table@isolated"]
    assert log.index("compile table@isolated") < log.index("probe default")
    # What default tuned at its first run goes to every later compile (+defaulttuned puts it in place).
    assert FakeVariantProcess.given["default"] is None
    assert FakeVariantProcess.given["ours"] == {"ab/k.best_config": '{"XBLOCK": 512}'}
    assert document["environment"] == {"device": "Fake GPU"} and document["eager_call_ms"] == 7.0
    # 30 rounds, a multiple of the 3 variants timed
    assert variants["ours"]["ms"] == pytest.approx(0.9) and len(variants["ours"]["rounds_ms"]) == 30
    assert variants["ours"]["default_ms"] == pytest.approx(1.0)  # stamped with its run's default
    # A variant whose process died or failed to compile is closed at once and timed nowhere;
    # one with a wrong result is timed (its rounds kept) but has no runtime.
    assert variants["max_autotune_gemm"]["error"] == "prepare: the max_autotune_gemm process died (exit code -9)"
    assert variants["max_autotune"]["error"] == "RuntimeError: out of memory"
    assert "rounds_ms" not in variants["max_autotune"]
    assert variants["table@isolated"]["ms"] is None and len(variants["table@isolated"]["rounds_ms"]) == 30
    # Profiled one after the other, the ATen timings passed on.
    assert variants["default"]["in_graph"] == {"seen": ["default"]}
    assert variants["table@isolated"]["in_graph"] == {"seen": ["default", "ours", "table@isolated"]}
    assert sorted(FakeVariantProcess.closed) == sorted(names)


def test_each_compile_of_a_variant_is_a_process_and_the_variant_their_median(tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    args = suite.parse_args(["--child", "bert_base", "--record", str(record), "--out", str(tmp_path),
                             "--variants", "ours", "--compiles", "3", "--rounds", "6"])
    FakeVariantProcess.log, FakeVariantProcess.closed = [], []
    assert suite.child_main(args, start=FakeVariantProcess) == 0
    log = FakeVariantProcess.log
    # Every compile its own process; the first compiles first, default's first of all.
    assert [x for x in log if x.startswith("compile")] == [
        "compile default", "compile ours", "compile default~2", "compile ours~2", "compile default~3", "compile ours~3"]
    assert log.count("eager_call_ms default") == 1 and not any("eager_call_ms default~" in x for x in log)
    # Only the first compiles profile in full; the others keep what they tuned at first run.
    assert [x for x in log if x.startswith("report")] == [
        "report default True", "report ours True", "report default~2 False", "report ours~2 False",
        "report default~3 False", "report ours~3 False"]
    variants = json.loads(record.read_text())["variants"]
    assert sorted(variants) == ["default", "ours"]  # the copies folded into their variant
    ours = variants["ours"]
    assert [c["ms"] for c in ours["compiles"]] == pytest.approx([0.9, 0.8, 1.2])
    assert ours["ms"] == pytest.approx(0.9) and ours["compile_s"] == pytest.approx(4.0)
    # The host's time a call: each compile's, and their median beside the median ms.
    assert [c["host_ms_by_length"]["128"] for c in ours["compiles"]] == pytest.approx([0.5, 0.4, 0.7])
    assert ours["host_ms_by_length"] == {"128": pytest.approx(0.5)} and ours["timing_cpu"] == 15
    assert len(ours["rounds_ms"]) == 6  # the first compile's rounds, paired with default's first
    assert variants["default"]["ms"] == pytest.approx(1.0) and ours["default_ms"] == pytest.approx(1.0)
    assert sorted(FakeVariantProcess.closed) == sorted(["default", "ours", "default~2", "ours~2", "default~3", "ours~3"])


def test_a_later_compile_of_an_autotuning_variant_resumes_too(tmp_path: Path) -> None:
    w = W.by_name(["bert_base"])[0]
    for compiles, resumed in ((1, False), (2, True)):
        args = suite.parse_args(["--variants", "max_autotune", "--compiles", str(compiles), "--out", str(tmp_path)])
        path = Path(suite.state_path(args.autotune_state, w.name, "max_autotune~2"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
        assert suite.resumes(args, w, args.parsed_variants) is resumed


def test_folding_compiles_takes_medians_and_any_compiles_error() -> None:
    ours, default = suite.parse_variant("ours"), suite.parse_variant("default")
    results = {"default": {"ms": 1.0, "compile_s": 3.0}, "default~2": {"ms": 1.2, "compile_s": 5.0},
               "ours": {"ms": 0.9, "compile_s": 4.0, "in_graph": {"x": 1}, "runtime_tuned": []},
               "ours~2": {"ms": 1.1, "compile_s": 6.0, "error": "wrong result: relative error 1e-1 against eager"}}
    folded = suite.fold_compiles(results, [default, ours], 2, dynamic=False)
    assert folded["default"]["ms"] == pytest.approx(1.1) and folded["default"]["compile_s"] == pytest.approx(4.0)
    assert folded["ours"]["ms"] is None and folded["ours"]["error"].startswith("wrong result")
    assert folded["ours"]["in_graph"] == {"x": 1}  # the first compile's report
    assert folded["ours"]["compiles"][0] == {"ms": 0.9, "compile_s": 4.0, "runtime_tuned": []}
    # A dynamic workload: the median at each length, then their geomean.
    dynamic = {"default": {"ms": 2.0, "ms_by_length": {"8": 1.0, "16": 4.0}, "compile_s": 1.0},
               "default~2": {"ms": 3.0, "ms_by_length": {"8": 3.0, "16": 3.0}, "compile_s": 1.0}}
    d = suite.fold_compiles(dynamic, [default], 2, dynamic=True)["default"]
    assert d["ms_by_length"] == {"8": pytest.approx(2.0), "16": pytest.approx(3.5)}
    assert d["ms"] == pytest.approx((2.0 * 3.5) ** 0.5)
    # One compile: the results as they are.
    assert suite.fold_compiles(results, [default, ours], 1, dynamic=False) == results
    with pytest.raises(suite.UsageError, match="names each variant's other compiles itself"):
        suite.parse_args(["--variants", "ours~2"])


def test_a_variants_lengths_run_in_its_turn_and_the_turns_rotate() -> None:
    log: list[tuple[str, int]] = []
    timers = {(name, length): FakeTimer(f"{name}/{length}", 1.0, log)
              for name in ("default", "ours") for length in ("128", "512")}
    seen: list[int] = []
    suite.interleaved_rounds(timers, rounds=2, fewest=10, round_ms=0.0, turn_of=lambda key: key[0],
                             after_round=lambda times, failed: seen.append(len(times[("ours", "512")])))
    assert [name for name, _ in log] == ["default/128", "default/512", "ours/128", "ours/512",
                                         "ours/128", "ours/512", "default/128", "default/512"]
    assert seen == [1, 2]  # after every round, the times so far


def test_the_median_of_an_even_count_is_the_mean_of_the_middle_two() -> None:
    assert suite.median([4.0, 1.0, 3.0, 2.0]) == pytest.approx(2.5)
    assert suite.median([3.0, 1.0, 2.0]) == 2.0


def test_a_missing_library_labels_the_environment_and_never_fails_it() -> None:
    assert suite.version_of("no_such_module_here").startswith("unknown (")


class InterruptedWhileTimed(FakeVariantProcess):
    """Its third round never comes back: the workload process is stopped there."""
    rounds = 0

    def reply(self) -> Any:
        if self.pending[0] == "round":
            InterruptedWhileTimed.rounds += 1
            if InterruptedWhileTimed.rounds > 4:
                raise KeyboardInterrupt
        return super().reply()


def test_a_workload_stopped_while_timed_keeps_the_rounds_it_finished(tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    args = suite.parse_args(["--child", "bert_base", "--record", str(record), "--out", str(tmp_path),
                             "--variants", "ours"])
    FakeVariantProcess.log, FakeVariantProcess.closed, InterruptedWhileTimed.rounds = [], [], 0
    with pytest.raises(KeyboardInterrupt):
        suite.child_main(args, start=InterruptedWhileTimed)
    variants = json.loads(record.read_text())["variants"]
    assert len(variants["ours"]["rounds_ms"]) == 2 and variants["ours"]["ms"] == pytest.approx(0.9)
    assert sorted(FakeVariantProcess.closed) == ["default", "ours"]


def test_a_variant_that_changes_the_benchmarker_times_its_own_aten_kernels(tmp_path: Path) -> None:
    record = tmp_path / "record.json"
    args = suite.parse_args(["--child", "bert_base", "--record", str(record), "--out", str(tmp_path),
                             "--variants", "ours+noflush", "ours"])
    FakeVariantProcess.log, FakeVariantProcess.closed = [], []
    assert suite.child_main(args, start=FakeVariantProcess) == 0
    variants = json.loads(record.read_text())["variants"]
    assert variants["ours+noflush"]["in_graph"] == {"seen": ["ours+noflush"]}
    assert variants["ours"]["in_graph"] == {"seen": ["default", "ours"]}  # not the unflushed timings


class FakeProcess:
    """A variant's process as VariantProcess.close sees it: it exits when joined, unless hung."""

    def __init__(self, hung: bool = False) -> None:
        self.alive, self.killed, self.hung = True, False, hung

    def join(self, timeout: Optional[float] = None) -> None:
        self.alive = self.alive and self.hung

    def is_alive(self) -> bool:
        return self.alive

    def kill(self) -> None:
        self.killed, self.alive = True, False


def handle_over_a_pipe(hung: bool = False) -> tuple[Any, Any]:
    import multiprocessing

    handle = object.__new__(suite.VariantProcess)
    handle.name, handle.owed, handle.process = "ours", 0, FakeProcess(hung)
    handle.conn, theirs = multiprocessing.Pipe()
    return handle, theirs


def test_closing_takes_the_answers_still_owed_before_its_own() -> None:
    handle, theirs = handle_over_a_pipe()
    handle.send("prepare")  # given up on: its answer comes before close's
    theirs.send(None)
    theirs.send({"failure": "closing"})  # the answer to close
    handle.close()
    assert [theirs.recv(), theirs.recv()] == [("prepare",), ("close",)]
    assert handle.owed == 0 and not handle.process.killed


def test_a_process_that_does_not_answer_is_killed_at_close(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(suite.VariantProcess, "CLOSE_WAIT_S", 0.05)
    handle, theirs = handle_over_a_pipe(hung=True)
    handle.send("compile", {})
    handle.close()
    assert handle.process.killed
