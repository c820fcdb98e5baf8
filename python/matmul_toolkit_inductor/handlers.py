"""Installing a choices class into Inductor for every thread that compiles.

Inductor (torch 2.11) keeps one choices handler per thread (`V.choices`): a thread's first
lowering makes one from `config.inductor_choices_class` and keeps it. A thread that lowered
before the install keeps its old handler: the autograd engine's thread, which compiles a
training step's backward graph, would go on with Inductor's own choices. So besides the
config and the calling thread's handler, V's `choices` property is wrapped while installed:
a thread whose handler is Inductor's default, or of a class installed here before (still
installed or undone since), gets one of the latest installed class (made once per thread).
"""

from __future__ import annotations

import threading
from typing import Any, Callable


def install_choices_class(cls: type) -> Callable[[], None]:
    """Makes every thread's Inductor lowering use a `cls()` handler; returns the undo."""
    from torch._inductor import config as inductor_config
    from torch._inductor.virtualized import V

    try:
        from torch._inductor.choices import InductorChoices
        defaults: tuple[type, ...] = (InductorChoices,)
    except ImportError:
        defaults = ()
    undo: list[Callable[[], None]] = []
    previous_class = getattr(inductor_config, "inductor_choices_class", None)
    previous_handler = getattr(V, "choices", None)
    inductor_config.inductor_choices_class = cls
    V.set_choices_handler(cls())
    if previous_handler is not None:
        undo.append(lambda: V.set_choices_handler(previous_handler))
    elif defaults:
        undo.append(lambda: V.set_choices_handler(defaults[0]()))
    undo.append(lambda: setattr(inductor_config, "inductor_choices_class", previous_class))

    owner = type(V)
    original = owner.__dict__.get("choices")
    if isinstance(original, property) and original.fget is not None:
        getter = original.fget
        per_thread = threading.local()

        def replaceable(handler: Any) -> bool:
            # Inductor's default, or one of ours (an outer install, or one undone since): the
            # latest install decides. A handler a user set on purpose stays.
            kind = type(handler)
            return kind in defaults or hasattr(kind, "mmt_installed")

        def choices(self: Any) -> Any:
            handler = getter(self)
            if isinstance(handler, cls) or not replaceable(handler):
                return handler
            mine = getattr(per_thread, "handler", None)
            if mine is None:
                mine = per_thread.handler = cls()
            return mine

        setattr(owner, "choices", property(choices))
        undo.append(lambda: setattr(owner, "choices", original))
    cls.mmt_installed = True  # type: ignore[attr-defined]
    undo.append(lambda: setattr(cls, "mmt_installed", False))

    def uninstall() -> None:
        while undo:
            undo.pop()()

    return uninstall
