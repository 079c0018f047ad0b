"""Every repository a Store hands out answers the interface written for it in
``memorylab.store.protocols``, on both backends, and the Store itself stays a small surface."""
import inspect

import pytest

from memorylab.store import Store, protocols
from memorylab.store.agents import AgentDirectory
from memorylab.store.bulk import BulkCopy, PostgresBulkCopy
from memorylab.store.context import SearchEntries, SessionBlocks
from memorylab.store.experiments import ExperimentRecords
from memorylab.store.in_memory import InMemoryBlockStorage, InMemorySessionStorage
from memorylab.store.integrity import PostgresIntegrity, SQLiteIntegrity
from memorylab.store.kv import KVEntries
from memorylab.store.longterm import LongTermRecords
from memorylab.store.sessions import SqlSessionCatalog, SqlSessionStorage

IMPLEMENTATIONS = [
    (protocols.CatalogedSessionStorage, SqlSessionStorage), (protocols.SessionStorage, InMemorySessionStorage),
    (protocols.SessionBlockStorage, InMemoryBlockStorage), (protocols.SessionCatalog, SqlSessionCatalog),
    (protocols.SessionBlockStorage, SessionBlocks), (protocols.EntryStorage, SearchEntries),
    (protocols.KVStorage, KVEntries), (protocols.AgentStorage, AgentDirectory),
    (protocols.LongTermStorage, LongTermRecords), (protocols.ExperimentStorage, ExperimentRecords),
    (protocols.IntegrityChecks, SQLiteIntegrity),
    (protocols.IntegrityChecks, PostgresIntegrity), (protocols.BulkStorage, BulkCopy),
    (protocols.BulkStorage, PostgresBulkCopy),
]


def interface(cls):
    """{method name: parameter names} of the public methods a class defines or inherits."""
    return {name: list(inspect.signature(member).parameters)
            for name, member in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")}


@pytest.mark.parametrize("protocol, implementation", IMPLEMENTATIONS,
                         ids=[f"{impl.__name__}" for _, impl in IMPLEMENTATIONS])
def test_each_repository_has_every_method_of_its_interface_with_the_same_parameters(protocol, implementation):
    promised, offered = interface(protocol), interface(implementation)
    assert {name: offered.get(name) for name in promised} == promised


def test_the_core_session_storage_is_under_25_methods_and_the_capabilities_are_optional():
    core = interface(protocols.SessionStorage)
    assert len(core) < 25, sorted(core)
    for capability in (protocols.TreeQueries, protocols.Outlines, protocols.PagedBranchReads):
        assert not set(interface(capability)) & set(core)
        assert isinstance(SqlSessionStorage.__new__(SqlSessionStorage), capability)
        assert not isinstance(InMemorySessionStorage("s1"), capability)


def test_the_store_is_a_handful_of_members_and_hands_out_its_repositories(tmp_path):
    public = {name for name in dir(Store) if not name.startswith("_")}
    repositories = {"sessions", "entries", "kv", "agents", "long_term", "experiments", "integrity", "bulk"}
    statements = {"fetch_one", "fetch_all", "fetch_tuples", "write_one"}  # what the repositories run their SQL with
    connections = {"transaction", "snapshot", "close"}  # declared here, provided by each backend
    assert public == repositories | statements | connections | {"search", "search_engine", "read_only"}
    with Store(tmp_path / "lab.db") as store:
        members = {name for name in dir(store) if not name.startswith("_")}
        assert len(members) <= 21 and "dialect" in members, sorted(members)
        storage = store.sessions.storage(store.sessions.ensure("default", "default", "s1"))
        assert isinstance(storage, SqlSessionStorage) and isinstance(storage.blocks, SessionBlocks)
        assert isinstance(store.integrity, SQLiteIntegrity) and store.kv is store.kv
