"""The type stubs (honker/_native.pyi) match the native module: every class,
method and parameter name, in order. Fails when they drift."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import honker
from honker import _native

STUB = Path(honker.__file__).with_name("_native.pyi")


def stub_classes() -> dict[str, dict[str, list[str]]]:
    tree = ast.parse(STUB.read_text())
    out: dict[str, dict[str, list[str]]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            methods = {}
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    a = item.args
                    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
                    methods[item.name] = [n for n in names if n not in ("self", "cls")]
            out[node.name] = methods
    return out


def runtime_params(obj) -> list[str]:
    sig = inspect.signature(obj)
    return [n for n in sig.parameters if n not in ("self", "cls")]


def test_every_native_class_is_stubbed_and_no_stub_is_stale():
    stubs = stub_classes()
    runtime = {n for n, v in vars(_native).items() if isinstance(v, type) and not n.startswith("_")}
    assert set(stubs) == runtime


def test_methods_and_parameters_match():
    for cls_name, methods in stub_classes().items():
        cls = getattr(_native, cls_name)
        public = {
            n
            for n, v in vars(cls).items()
            if not n.startswith("_")
            and (callable(v) or isinstance(v, property) or type(v).__name__ == "getset_descriptor")
        }
        stubbed = {n for n in methods if not n.startswith("_")}
        assert stubbed == public, f"{cls_name}: stub {sorted(stubbed)} vs module {sorted(public)}"
        for name, params in methods.items():
            target = cls if name == "__new__" else getattr(cls, name)
            if isinstance(target, type) or callable(target):
                if name == "__new__":
                    assert runtime_params(cls) == params, f"{cls_name}()"
                elif callable(target):
                    assert runtime_params(target) == params, f"{cls_name}.{name}"


def test_module_constants_are_stubbed():
    tree = ast.parse(STUB.read_text())
    names = {
        n.target.id
        for n in tree.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    assert {"__version__", "ERROR_CODES"} <= names
    assert set(_native.ERROR_CODES) == {k for k in honker.errors._BY_CODE}
