"""Installing into Inductor: a choices class for every thread that compiles, and config
settings, as layers that undo in any order.

Inductor (torch 2.11) keeps one choices handler per thread (`V.choices`): a thread's first
lowering makes one from `config.inductor_choices_class` and keeps it. A thread that lowered
before an install keeps its old handler: the autograd engine's thread, which compiles a
training step's backward graph, would go on with Inductor's own choices. So while any layer
with a choices class is installed, V's `choices` property is wrapped: a thread whose handler
is Inductor's default, or of a class installed here (still installed or undone since), gets
one of the newest installed class (made once per thread and class). A handler a user set on
purpose stays.

A layer's choices class gets a name in this module, `handlers.<name>`, so that pickle can
store it by reference: Inductor's FX graph cache pickles its config, the choices class in it,
into every graph's cache key, and a class it cannot pickle (one made in a function) makes it
bypass the cache, logging a traceback at every compile. The name is the layer's identity
(the model and the policy it decides with), so a graph cached under one is not reused under
another.

Each layer may also set config attributes. The newest layer that sets an attribute decides
its value; once no layer sets it, it goes back to what it was before the first. So
`a = use_model(); b = use_table(...); a.uninstall()` leaves b in force, and undoing b then
leaves Inductor as it was.
"""

from __future__ import annotations

import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

# A config attribute a layer sets: (object, attribute, new value from the value before any layer).
Setting = tuple[Any, str, Callable[[Any], Any]]


@dataclass(eq=False)
class _Layer:
    choices_class: Optional[type]
    settings: list[Setting] = field(default_factory=list)
    handler: Any = None              # the handler it set in the installing thread
    previous_handler: Any = None     # and the one that thread had before


_lock = threading.RLock()
_layers: list[_Layer] = []           # oldest first
_originals: dict[tuple[int, str], tuple[Any, str, Any]] = {}  # (id(obj), attr) -> (obj, attr, value before)
_property: dict[str, Any] = {}       # the wrapped property's owner and original, while wrapped
_named: dict[str, list[type]] = {}   # name -> the installed classes of that name, oldest first


def _inductor() -> tuple[Any, Any, tuple[type, ...]]:
    from torch._inductor import config as inductor_config
    from torch._inductor.virtualized import V

    try:
        from torch._inductor.choices import InductorChoices
        defaults: tuple[type, ...] = (InductorChoices,)
    except ImportError:
        defaults = ()
    return inductor_config, V, defaults


def _newest_class() -> Optional[type]:
    return next((layer.choices_class for layer in reversed(_layers) if layer.choices_class is not None), None)


def _apply_settings() -> None:
    for key, (obj, attr, before) in list(_originals.items()):
        value = before
        for layer in _layers:
            for o, a, make in layer.settings:
                if o is obj and a == attr:
                    value = make(before)
        setattr(obj, attr, value)
        if not any(o is obj and a == attr for layer in _layers for o, a, _ in layer.settings):
            del _originals[key]


def _wrap_choices_property(V: Any, defaults: tuple[type, ...]) -> None:
    owner = type(V)
    original = owner.__dict__.get("choices")
    if _property or not isinstance(original, property) or original.fget is None:
        return  # wrapped already, or a V without the property: config.inductor_choices_class only
    getter = original.fget
    per_thread = threading.local()

    def choices(self: Any) -> Any:
        handler = getter(self)
        newest = _newest_class()
        kind = type(handler)
        if newest is None or isinstance(handler, newest) or not (kind in defaults or hasattr(kind, "mmt_installed")):
            return handler
        made: dict[type, Any] = per_thread.__dict__.setdefault("made", {})
        if newest not in made:
            made[newest] = newest()
        return made[newest]

    setattr(owner, "choices", property(choices))
    _property.update(owner=owner, original=original)


def _raw_handler(V: Any) -> Any:
    """This thread's handler as Inductor keeps it (not the wrapper's answer)."""
    if _property:
        return _property["original"].fget(V)
    return getattr(V, "choices", None)


def _unwrap_choices_property() -> None:
    if _property:
        setattr(_property["owner"], "choices", _property["original"])
        _property.clear()


def _name(cls: type, name: str) -> None:
    """Makes `cls` this module's attribute `name`, where pickle looks for it."""
    module = sys.modules[__name__]
    if hasattr(module, name) and name not in _named:
        raise ValueError(f"handlers.{name} is taken: a choices class needs a name of its own")
    cls.__module__, cls.__name__, cls.__qualname__ = __name__, name, name
    _named.setdefault(name, []).append(cls)
    setattr(module, name, cls)


def _unname(cls: type) -> None:
    name, module = cls.__name__, sys.modules[__name__]
    classes = _named.get(name, [])
    if cls in classes:
        classes.remove(cls)
    if classes:
        setattr(module, name, classes[-1])  # two layers of one name: the other one's
        return
    _named.pop(name, None)
    if getattr(module, name, None) is cls:
        delattr(module, name)


def class_name(prefix: str, *parts: Optional[str]) -> str:
    """A class name for a layer's identity: `prefix` and the parts given, as one identifier."""
    return "_".join([prefix, *(re.sub(r"\W", "_", p) for p in parts if p)])


def install_layer(choices_class: Optional[type] = None, settings: Optional[list[Setting]] = None,
                  name: Optional[str] = None) -> Callable[[], None]:
    """Installs `choices_class` for every thread (None: no choices class), named `name` in this
    module (default: its own name), and `settings`; returns the undo, which may run in any
    order with other layers' and more than once."""
    inductor_config, V, defaults = _inductor()
    layer = _Layer(choices_class, list(settings or []))
    with _lock:
        if choices_class is not None:
            _name(choices_class, name or choices_class.__name__)
        for obj, attr, _ in layer.settings:
            _originals.setdefault((id(obj), attr), (obj, attr, getattr(obj, attr, None)))
        if choices_class is not None:
            key = (id(inductor_config), "inductor_choices_class")
            _originals.setdefault(key, (inductor_config, "inductor_choices_class",
                                        getattr(inductor_config, "inductor_choices_class", None)))
            layer.settings.append((inductor_config, "inductor_choices_class", lambda _: choices_class))
            choices_class.mmt_installed = True  # type: ignore[attr-defined]
            layer.previous_handler = getattr(V, "choices", None)
            layer.handler = choices_class()
            V.set_choices_handler(layer.handler)
            _wrap_choices_property(V, defaults)
        _layers.append(layer)
        _apply_settings()

    def undo() -> None:
        with _lock:
            if layer not in _layers:
                return
            mine = choices_class is not None and _raw_handler(V) is layer.handler
            _layers.remove(layer)
            _apply_settings()
            if choices_class is None:
                return
            choices_class.mmt_installed = False  # type: ignore[attr-defined]
            _unname(choices_class)
            if _newest_class() is None:
                _unwrap_choices_property()
            if mine:
                # The installing thread gets back what it had, unless that was one of ours
                # undone since: then Inductor's default (the wrapper, while a layer is
                # left, swaps it for the newest's).
                previous = layer.previous_handler
                if previous is None or getattr(type(previous), "mmt_installed", True) is False:
                    previous = defaults[0]() if defaults else None
                if previous is not None:
                    V.set_choices_handler(previous)

    return undo


class DefaultLayoutForAten:
    """Mixin for our subclasses of Inductor's choices: a GEMM whose candidates are all ATen
    gets the output layout default torch.compile gives it.

    Under max_autotune_gemm, Inductor (torch 2.11, InductorChoices._need_to_fix_layout) fixes
    every GEMM's output layout, because a Triton kernel is built for one; without it, mm's and
    addmm's stay flexible, and the scheduler may give them the strides their consumers want.
    A GEMM our model leaves to ATen should compile as it would without max_autotune_gemm.
    With Triton candidates, or on a backend other than CUDA, Inductor decides."""

    def _need_to_fix_layout(self, adjusted_choices: list[Any], op_name: str) -> bool:
        if adjusted_choices and all(_is_extern(ktc) for ktc in adjusted_choices) \
                and getattr(getattr(adjusted_choices[0], "inputs", None), "device_type", None) == "cuda":
            from torch._inductor import config as inductor_config

            flexible = bool(getattr(inductor_config, "max_autotune_allow_flexible_layouts", False))
            return op_name not in ("mm", "addmm") and not flexible
        return super()._need_to_fix_layout(adjusted_choices, op_name)  # type: ignore[misc, no-any-return]


def _is_extern(ktc: Any) -> bool:
    from torch._inductor.select_algorithm import ExternKernelChoice

    return isinstance(getattr(ktc, "template", None), ExternKernelChoice)
