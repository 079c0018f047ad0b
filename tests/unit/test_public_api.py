"""The public API is typed and listed once: every function and method reachable from
``memorylab.__all__`` says what it returns, ``__all__`` names each export once and every name in it
imports, and ``py.typed`` ships beside the package so type checkers read those annotations."""
import inspect
import typing
from functools import cached_property
from pathlib import Path

import memorylab
from memorylab.store import Store
from memorylab.store.postgres import PostgresStore
from memorylab.store.repository import Repository
from memorylab.store.sqlite import SQLiteStore


def subclasses(cls):
    for subclass in cls.__subclasses__():
        yield subclass
        yield from subclasses(subclass)


def importable():
    """Every public name of the package, in ``__all__`` or not (the types the API hands back are left out of it)."""
    return [name for name in dir(memorylab) if not name.startswith("_")]


def public_classes():
    """The classes the package exports (exceptions need no annotations), then every repository class
    of the store: the ones a ``Store`` hands out, a session's storage and blocks, and the backends'."""
    exported = [getattr(memorylab, name) for name in importable()]
    classes = [obj for obj in exported if inspect.isclass(obj) and not issubclass(obj, BaseException)]
    return classes + [Repository, *subclasses(Repository), SQLiteStore, PostgresStore]


def callable_of(cls, name, member):
    """The function behind a class attribute (a method, property, cached property or other
    descriptor), or None for an attribute that is not one."""
    if isinstance(member, (staticmethod, classmethod)):
        return member.__func__
    if isinstance(member, property):
        return member.fget
    if isinstance(member, cached_property):
        return member.func
    if inspect.isfunction(member):
        return member
    if hasattr(member, "__get__"):
        resolved = getattr(cls, name)
        return resolved if inspect.isfunction(resolved) else None
    return None


def public_members():
    """``{"Class.method": function}`` for every public member that memorylab code defines on a
    public class or one of its memorylab bases."""
    members = {}
    for cls in public_classes():
        for owner in cls.__mro__:
            if not owner.__module__.startswith("memorylab."):
                continue
            for name, member in vars(owner).items():
                function = None if name.startswith("_") else callable_of(owner, name, member)
                if function is not None:
                    members[f"{owner.__qualname__}.{name}"] = function
    return members


def public_functions():
    return {name: obj for name in importable()
            if inspect.isfunction(obj := getattr(memorylab, name))}


def unannotated(functions):
    return sorted(name for name, function in functions.items()
                  if inspect.signature(function).return_annotation is inspect.Signature.empty)


def test_every_public_function_says_what_it_returns():
    functions = public_functions()
    assert {"plan_compaction", "export_session", "to_dataframe", "identify"} <= set(functions)
    assert unannotated(functions) == []


def test_every_public_method_says_what_it_returns():
    members = public_members()
    assert {"Session.get_history", "Store.search", "SqlSessionStorage.append", "BranchReads.path", "SessionBlocks.all",
            "PostgresIntegrity.fts_indexes", "Repository.transaction", "ContextWindow.load_json",
            "Tool.execute"} <= set(members)
    assert unannotated(members) == []


def test_the_walk_covers_every_repository_a_store_hands_out():
    walked = set(public_classes())
    handed_out = {typing.get_type_hints(member.func).get("return")
                  for member in vars(Store).values() if isinstance(member, cached_property)}
    assert len(handed_out) == 8
    assert handed_out <= walked


def test_all_lists_each_name_once_and_every_name_imports():
    assert len(memorylab.__all__) == len(set(memorylab.__all__))
    # ``from memorylab import *`` takes each name of ``__all__`` as an attribute of the package.
    assert [name for name in memorylab.__all__ if not hasattr(memorylab, name)] == []


def test_all_is_the_user_facing_api_and_the_rest_still_imports():
    assert len(memorylab.__all__) < 60
    assert {"Store", "Session", "Memory", "KVStore", "ChatRunner", "Experiments", "plan_compaction",
            "import_session", "MemoryLabError", "NotFoundError"} <= set(memorylab.__all__)
    assert {"CompactionPlan", "apply_overlays", "parse_export", "ReplayResult", "StoreFullError"} <= set(
        importable()) - set(memorylab.__all__)


def test_the_package_ships_its_py_typed_marker():
    assert Path(memorylab.__file__).with_name("py.typed").is_file()
