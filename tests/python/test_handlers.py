"""install_layer against a fake Inductor whose V keeps one handler per thread, made
on a thread's first use, as torch 2.11's virtualized._choices_default does."""

from __future__ import annotations

import queue
import sys
import threading
import types
from typing import Any, Callable

import pytest

from matmul_toolkit_inductor.handlers import install_layer


class InductorChoices:
    pass


@pytest.fixture
def fake_v(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    handlers = threading.local()
    config = types.SimpleNamespace(inductor_choices_class=None)

    class FakeV:
        @property
        def choices(self) -> Any:
            if not hasattr(handlers, "h"):
                handlers.h = (config.inductor_choices_class or InductorChoices)()
            return handlers.h

        def set_choices_handler(self, handler: Any) -> None:
            handlers.h = handler

    V = FakeV()
    modules = {"torch": types.ModuleType("torch"), "torch._inductor": types.ModuleType("torch._inductor"),
               "torch._inductor.config": config,
               "torch._inductor.virtualized": types.SimpleNamespace(V=V),
               "torch._inductor.choices": types.SimpleNamespace(InductorChoices=InductorChoices)}
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(modules["torch._inductor"], "config", config, raising=False)
    return V, config


class OtherThread:
    """A thread that lowered before any install (as the autograd thread does) and then
    reports, each time it is asked, the class of its handler."""

    def __init__(self, V: Any) -> None:
        self.V = V
        self.requests: queue.Queue[bool] = queue.Queue()
        self.replies: queue.Queue[str] = queue.Queue()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        self.first = self.replies.get(timeout=10)

    def run(self) -> None:
        self.replies.put(type(self.V.choices).__name__)
        while self.requests.get():
            self.replies.put(type(self.V.choices).__name__)

    def ask(self) -> str:
        self.requests.put(True)
        return self.replies.get(timeout=10)

    def join(self) -> None:
        self.requests.put(False)
        self.thread.join()


def installed_class(name: str) -> type:
    return type(name, (), {})


def test_every_thread_gets_the_installed_class_and_back(fake_v: tuple[Any, Any]) -> None:
    V, config = fake_v
    other = OtherThread(V)
    assert other.first == "InductorChoices"
    Model = installed_class("Model")
    undo: Callable[[], None] = install_layer(Model)
    assert type(V.choices) is Model and config.inductor_choices_class is Model
    assert other.ask() == "Model"
    undo()
    assert type(V.choices) is InductorChoices and config.inductor_choices_class is None
    assert other.ask() == "InductorChoices"
    other.join()


def test_the_latest_install_decides_and_undoing_it_gives_the_outer_back(fake_v: tuple[Any, Any]) -> None:
    V, config = fake_v
    other = OtherThread(V)
    Model, Table = installed_class("Model"), installed_class("Table")
    undo_model = install_layer(Model)
    assert other.ask() == "Model"
    undo_table = install_layer(Table)
    assert type(V.choices) is Table and other.ask() == "Table"
    undo_table()
    assert type(V.choices) is Model and other.ask() == "Model"
    undo_model()
    assert other.ask() == "InductorChoices"
    other.join()


def test_a_handler_set_on_purpose_stays(fake_v: tuple[Any, Any]) -> None:
    V, config = fake_v
    mine = types.SimpleNamespace(name="the user's")
    seen: list[Any] = []
    ready, go = threading.Event(), threading.Event()

    def user_thread() -> None:
        V.set_choices_handler(mine)
        ready.set()
        go.wait(10)
        seen.append(V.choices)

    thread = threading.Thread(target=user_thread, daemon=True)
    thread.start()
    ready.wait(10)
    undo = install_layer(installed_class("Model"))
    go.set()
    thread.join()
    undo()
    assert seen == [mine]


def test_layers_undone_out_of_order_leave_the_newest_then_nothing(fake_v: tuple[Any, Any]) -> None:
    V, config = fake_v
    other = OtherThread(V)
    settings = types.SimpleNamespace(tag="user", backends="ATEN,TRITON")
    unwrapped = type(V).__dict__["choices"]
    Model, Table = installed_class("Model"), installed_class("Table")
    undo_model = install_layer(Model, [(settings, "tag", lambda before: before + "+model"),
                                       (settings, "backends", lambda _: "ATEN")])
    undo_table = install_layer(Table, [(settings, "tag", lambda before: before + "+table")])
    assert (settings.tag, settings.backends) == ("user+table", "ATEN")
    undo_model()  # the older one first
    assert (settings.tag, settings.backends) == ("user+table", "ATEN,TRITON")
    assert config.inductor_choices_class is Table and type(V.choices) is Table and other.ask() == "Table"
    undo_model()  # twice: nothing more happens
    assert settings.tag == "user+table"
    undo_table()
    assert (settings.tag, settings.backends) == ("user", "ATEN,TRITON") and config.inductor_choices_class is None
    assert type(V.choices) is InductorChoices and other.ask() == "InductorChoices"
    assert type(V).__dict__["choices"] is unwrapped  # Inductor's property is back
    other.join()


def test_settings_alone_need_no_choices_class(fake_v: tuple[Any, Any]) -> None:
    V, config = fake_v
    table = types.SimpleNamespace(table=None)
    undo = install_layer(None, [(table, "table", lambda _: {"key": []})])
    assert table.table == {"key": []} and type(V.choices) is InductorChoices
    undo()
    assert table.table is None


def test_an_installed_class_pickles_by_name_as_inductors_cache_key_needs(fake_v: tuple[Any, Any]) -> None:
    """Inductor's FX graph cache pickles its config, the choices class in it; a class made in
    a function would make it bypass the cache."""
    import pickle

    from matmul_toolkit_inductor import handlers

    def made_in_a_function() -> type:
        class Choices:
            pass
        return Choices

    first, second = made_in_a_function(), made_in_a_function()
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(first)
    undo_first = install_layer(first, name=handlers.class_name("ModelChoices", "mmt-0123", "isolated"))
    assert pickle.loads(pickle.dumps(first)) is first
    assert first.__name__ == "ModelChoices_mmt_0123_isolated"
    undo_second = install_layer(second, name="ModelChoices_mmt_0123_isolated")  # the same identity twice
    assert pickle.loads(pickle.dumps(second)) is second
    undo_second()
    assert pickle.loads(pickle.dumps(first)) is first  # the name is the other layer's again
    undo_first()
    assert not hasattr(handlers, "ModelChoices_mmt_0123_isolated")
