#!/usr/bin/env python3
"""Checks an `export-lut --lut-format inductor` table against the torch it is meant for.

    python3 check_inductor_lut.py LUT.json [--no-compile] [--max-keys N]

Needs torch with CUDA and Triton (run it on the GPU machine). For every key of the table:

1. Parses the key ([device+]((dtype, size, stride), ...)[+scalars]+op) and builds the
   operands on the GPU with exactly those sizes and strides (addmm: the 1-D bias that
   torch.nn.Linear passes, which Inductor expands to [M, N] with stride [0, 1]).
2. Computes the key with torch's own function
   (torch._inductor.lookup_table.LookupTableChoices.make_lookup_key, on MMKernelInputs of
   those tensors) and checks it equals ours, with and without the device prefix; a device
   prefix must equal the device key torch builds for this GPU.
3. Checks every value: a list of dicts whose template_id is the uid of Inductor's Triton
   template for the op (torch._inductor.kernel.mm.mm_template / bmm.bmm_template) and whose
   fields are the ones that template takes, with the right types; or the uid of one of the
   op's ATen kernels (aten_mm, aten_bmm, aten_addmm, aten_bias_addmm) and nothing else.
4. Unless --no-compile: compiles the op with max-autotune, the table installed
   (config.lookup_table.table + LookupTableChoices), records the keys Inductor looks up and
   the choices it autotunes, and checks that the lookup hit our key and that the Triton
   choices are exactly our configs (one per entry, same block sizes, stages and warps), and
   an ATen choice is offered exactly when the table names one.

Exit code 0 and "OK" when everything holds; 1 with one line per problem otherwise; 2 when
the table cannot be read or torch/CUDA is missing.
"""

import argparse
import ast
import json
import re
import sys

CONFIG_FIELDS = {
    "BLOCK_M": int, "BLOCK_N": int, "BLOCK_K": int, "GROUP_M": int, "num_stages": int,
    "num_warps": int, "EVEN_K": bool, "USE_FAST_ACCUM": bool, "ACC_TYPE": str,
}
DTYPES = {"torch.float16": "float16", "torch.bfloat16": "bfloat16", "torch.float32": "float32"}
KEY_RE = re.compile(r"^(?:(?P<device>[^(]+)\+)?(?P<inputs>\(\(.*\)\))(?:\+(?P<scalars>[^+]+))?\+(?P<op>mm|addmm|bmm)$")


def parse_key(key):
    """(device or None, [(dtype name, size, stride)], {scalar: value}, op) or raises ValueError."""
    match = KEY_RE.match(key)
    if not match:
        raise ValueError("does not look like [device+]((dtype, size, stride), ...)[+scalars]+op")
    text = match.group("inputs")
    for torch_name, name in DTYPES.items():
        text = text.replace(torch_name, repr(name))
    operands = ast.literal_eval(text)
    if not isinstance(operands, tuple) or not all(isinstance(o, tuple) and len(o) == 3 for o in operands):
        raise ValueError("the input part is not a tuple of (dtype, size, stride)")
    scalars = {}
    if match.group("scalars"):
        for part in match.group("scalars").split("&"):
            name, _, value = part.partition("=")
            scalars[name] = value
    return match.group("device"), list(operands), scalars, match.group("op")


def padded_key(key):
    """The key of the problem as Inductor's pad_mm pass pads it (each misaligned M, N, K
    rounded up to 8 elements for 16-bit dtypes, 4 for float32, never a dimension of 1;
    padded operands are contiguous row-major copies), or None when nothing is padded."""
    device, operands, scalars, op = parse_key(key)
    *bias, a, b = operands
    dtype = a[0]
    align = {"float16": 8, "bfloat16": 8, "float32": 4}.get(dtype, 0)
    batch = a[1][:-2]
    m, k, n = a[1][-2], a[1][-1], b[1][-1]
    pad = lambda x: x if align == 0 or x == 1 or x % align == 0 else (x // align + 1) * align
    pm, pk, pn = pad(m), pad(k), pad(n)
    if (pm, pk, pn) == (m, k, n):
        return None

    def contiguous(dims):
        strides, step = [], 1
        for d in reversed(dims):
            strides.insert(0, step)
            step *= d
        return strides

    def text(dt, size, stride):
        return f"(torch.{dt}, {list(size)}, {list(stride)})"

    parts = []
    if bias:
        parts.append(text(bias[0][0], [pm, pn], [0, 1]))
    parts.append(text(dtype, batch + [pm, pk], contiguous(batch + [pm, pk])))
    parts.append(text(b[0], batch + [pk, pn], contiguous(batch + [pk, pn])))
    out = "(" + ", ".join(parts) + ")"
    if scalars:
        out += "+" + "&".join(f"{name}={value}" for name, value in scalars.items())
    out += "+" + op
    return out if device is None else f"{device}+{out}"


def check_entries(key, op, entries, template_uids, problems):
    expected_uid = template_uids["bmm" if op == "bmm" else "mm"]
    aten_uids = template_uids["aten_" + op]
    if not isinstance(entries, list) or not entries:
        problems.append(f"{key}: the value is not a non-empty list")
        return
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            problems.append(f"{key}: entry {i} is not a dict")
            continue
        if str(entry.get("template_id", "")).startswith("aten::"):
            if entry["template_id"] not in aten_uids:
                problems.append(f"{key}: entry {i} has template_id {entry['template_id']!r}, "
                                f"torch's {op} ATen kernels are {aten_uids}")
            if set(entry) != {"template_id"}:
                problems.append(f"{key}: ATen entry {i} has fields besides template_id: {sorted(entry)}")
            continue
        if entry.get("template_id") != expected_uid:
            problems.append(f"{key}: entry {i} has template_id {entry.get('template_id')!r}, "
                            f"torch's {op} Triton template is {expected_uid!r}")
        for field, kind in CONFIG_FIELDS.items():
            value = entry.get(field)
            if field not in entry:
                problems.append(f"{key}: entry {i} lacks {field}")
            elif kind is int and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                problems.append(f"{key}: entry {i} {field}={value!r} is not a positive integer")
            elif kind is not int and not isinstance(value, kind):
                problems.append(f"{key}: entry {i} {field}={value!r} is not a {kind.__name__}")
        unknown = set(entry) - set(CONFIG_FIELDS) - {"template_id", "template_hash"}
        if unknown:
            problems.append(f"{key}: entry {i} has fields the template does not take: {sorted(unknown)}")


def make_operands(torch, operands, op):
    """The tensors the user passes (addmm: a 1-D bias) and the ones Inductor keys."""
    tensors = []
    for dtype, size, stride in operands:
        t = torch.empty_strided(size, stride, dtype=getattr(torch, dtype), device="cuda")
        if 0 not in stride:  # an expanded bias is replaced below
            t.normal_()
        tensors.append(t)
    if op != "addmm":
        return tensors, tensors
    dtype, size, stride = operands[0]
    if list(stride) != [0, 1]:
        raise ValueError(f"the addmm bias has stride {stride}, expected [0, 1] (an expanded 1-D bias)")
    bias = torch.randn(size[1], dtype=getattr(torch, dtype), device="cuda")
    return [bias] + tensors[1:], [bias.expand(size[0], size[1])] + tensors[1:]


def kernel_inputs_of(torch, tensors, scalars):
    from torch._inductor.kernel_inputs import MMKernelInputs

    class Node:
        """What MMKernelInputs reads from an IR node, answered by a real tensor."""

        def __init__(self, tensor):
            self.tensor = tensor

        def get_device(self):
            return self.tensor.device

        def get_dtype(self):
            return self.tensor.dtype

        def get_size(self):
            return tuple(self.tensor.shape)

        def get_stride(self):
            return tuple(self.tensor.stride())

    class Inputs(MMKernelInputs):
        def shapes_autotune(self):
            return self.shapes_symbolic()

        def strides_autotune(self):
            return self.strides_symbolic()

        def shapes_hinted(self):
            return self.shapes_symbolic()

        def strides_hinted(self):
            return self.strides_symbolic()

    return Inputs([Node(t) for t in tensors], scalars or None)


def numbers_of(choice):
    """BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps of a Triton choice, from its description."""
    text = str(getattr(choice, "description", ""))
    found = dict(re.findall(r"\b(BLOCK_[MNK]|num_stages|num_warps)\s*[=:]\s*(\d+)", text))
    try:
        return tuple(int(found[f]) for f in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps"))
    except KeyError:
        return None


def compile_check(torch, key, table, op, user_tensors, problems, notes):
    table_key_entries = table[key]
    from torch._inductor import config as inductor_config
    from torch._inductor.choices import InductorChoices
    from torch._inductor.lookup_table.choices import LookupTableChoices
    from torch._inductor.select_algorithm import (
        TritonTemplateCaller, add_preprocessing_fn, clear_preprocessing_fns)
    from torch._inductor.utils import fresh_cache
    from torch._inductor.virtualized import V

    looked_up = []

    class Recording(LookupTableChoices):
        def lookup_template_configs(self, kernel_inputs, op_name, template_uids, template_hash_map=None):
            result = super().lookup_template_configs(kernel_inputs, op_name, template_uids, template_hash_map)
            looked_up.append((self.make_lookup_key_variants(kernel_inputs, op_name), result))
            return result

    seen_choices = []

    def record(choices):
        seen_choices.append(list(choices))
        return choices

    fn = {"mm": torch.mm, "addmm": torch.addmm, "bmm": torch.bmm}[op]
    torch._dynamo.reset()
    clear_preprocessing_fns()
    add_preprocessing_fn(record)
    V.set_choices_handler(Recording())
    try:
        with fresh_cache(), inductor_config.patch({
            "max_autotune": True, "max_autotune_gemm": True,
            "max_autotune_gemm_backends": "TRITON,ATEN",
            "lookup_table.table": {key: table_key_entries},
        }):
            compiled = torch.compile(lambda *args: fn(*args), dynamic=False)
            out = compiled(*user_tensors)
            torch.cuda.synchronize()
            reference = fn(*user_tensors)
            if not torch.allclose(out.float(), reference.float(), rtol=2e-2, atol=2e-2 * reference.abs().max().item()):
                problems.append(f"{key}: the compiled {op} with our configs gives a wrong result")
    except Exception as e:  # the check reports every failure as one line and goes on
        problems.append(f"{key}: torch.compile with the table failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        return
    finally:
        clear_preprocessing_fns()
        V.set_choices_handler(InductorChoices())

    # Inductor's pad_mm pass may pad a misaligned M, N or K before autotuning (it decides
    # by a benchmark): then it looks up the padded problem's key, which the table must hold.
    padded = padded_key(key)
    accepted = {key} | ({padded} if padded in table else set())
    if padded is not None and padded not in table:
        problems.append(f"{key}: Inductor may pad this problem, and the table lacks its padded key {padded!r}")
    hit = [result for (variants, result) in looked_up if accepted & set(variants)]
    if padded is not None and any(padded in variants for (variants, _) in looked_up):
        notes.append(f"{key}: Inductor padded it and looked up {padded!r}")
    if not looked_up:
        problems.append(f"{key}: Inductor never consulted the lookup table for this {op}")
        return
    if not hit:
        tried = sorted({k for (variants, _) in looked_up for k in variants if k})
        problems.append(f"{key}: Inductor looked up other keys: {tried}")
        return
    if not any(result for result in hit):
        problems.append(f"{key}: the key matched but no entry is for a template Inductor uses here")
        return
    triton = [c for choices in seen_choices for c in choices if isinstance(c, TritonTemplateCaller)]
    triton_entries = [e for e in table_key_entries if not e["template_id"].startswith("aten::")]
    wants_aten = len(triton_entries) < len(table_key_entries)
    offered_aten = any(not isinstance(c, TritonTemplateCaller) for choices in seen_choices for c in choices)
    if seen_choices and wants_aten != offered_aten:
        problems.append(f"{key}: the table {'names' if wants_aten else 'does not name'} ATen, "
                        f"Inductor {'offered' if offered_aten else 'did not offer'} it")
    if len(triton) != len(triton_entries):
        problems.append(f"{key}: Inductor autotuned {len(triton)} Triton choices, the table lists {len(triton_entries)}")
        return
    if not triton:
        return
    wanted = sorted((e["BLOCK_M"], e["BLOCK_N"], e["BLOCK_K"], e["num_stages"], e["num_warps"]) for e in triton_entries)
    got = [numbers_of(c) for c in triton]
    if any(g is None for g in got):
        notes.append(f"{key}: choice descriptions do not show block sizes; matched by count only "
                     f"(e.g. {getattr(triton[0], 'description', '')!r})")
    elif sorted(got) != wanted:
        problems.append(f"{key}: Inductor's Triton choices {sorted(got)} are not the table's {wanted}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lut", help="lookup table written by export-lut --lut-format inductor")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile check")
    parser.add_argument("--max-keys", type=int, default=0, help="check only the first N keys (0: all)")
    args = parser.parse_args()

    try:
        with open(args.lut) as f:
            table = json.load(f)
    except (OSError, ValueError) as e:
        print(f"error: {args.lut}: {e}", file=sys.stderr)
        return 2
    if not isinstance(table, dict) or not table:
        print(f"error: {args.lut}: not a non-empty JSON object", file=sys.stderr)
        return 2
    try:
        import torch
        from torch._inductor.kernel.bmm import bmm_template
        from torch._inductor.kernel.mm import mm_template
        from torch._inductor.lookup_table.choices import LookupTableChoices
    except ImportError as e:
        print(f"error: torch with torch._inductor.lookup_table is needed: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: no CUDA device: the lookup table is only consulted for CUDA inputs", file=sys.stderr)
        return 2

    from torch._inductor.kernel.bmm import aten_bmm
    from torch._inductor.kernel.mm import aten_addmm, aten_bias_addmm, aten_mm
    template_uids = {"mm": mm_template.uid, "bmm": bmm_template.uid, "aten_mm": [aten_mm.uid],
                     "aten_bmm": [aten_bmm.uid], "aten_addmm": [aten_bias_addmm.uid, aten_addmm.uid]}
    device_key = LookupTableChoices._get_device_key(torch.device("cuda", torch.cuda.current_device()))
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, device key {device_key!r}, "
          f"templates {template_uids}")

    problems, notes = [], []
    keys = list(table)[: args.max_keys] if args.max_keys > 0 else list(table)
    for key in keys:
        try:
            device, operands, _, op = parse_key(key)
            user_tensors, keyed_tensors = make_operands(torch, operands, op)
        except (ValueError, SyntaxError, TypeError, RuntimeError) as e:
            problems.append(f"{key}: cannot build the inputs: {e}")
            continue
        check_entries(key, op, table[key], template_uids, problems)
        if device is not None and device != device_key:
            problems.append(f"{key}: device prefix {device!r}, torch's device key here is {device_key!r}")

        # Inductor's addmm passes torch.addmm's alpha and beta (1, 1) as the kernel scalars.
        inputs = kernel_inputs_of(torch, keyed_tensors, {"alpha": 1, "beta": 1} if op == "addmm" else None)
        torch_key = LookupTableChoices().make_lookup_key(inputs, op, include_device=device is not None)
        if torch_key != key:
            problems.append(f"{key}: torch builds {torch_key!r}")
            continue
        if not args.no_compile:
            compile_check(torch, key, table, op, user_tensors, problems, notes)
        print(f"checked {key}")

    for note in notes:
        print(f"note: {note}")
    if problems:
        for p in problems:
            print(f"MISMATCH: {p}")
        print(f"FAIL: {len(problems)} problem(s) in {len(keys)} keys of {args.lut}")
        return 1
    print(f"OK: {len(keys)} keys of {args.lut} match torch {torch.__version__}"
          + ("" if args.no_compile else " and Inductor autotunes exactly their configs"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
