"""A session runs with its own context: an imported one with what it recorded (its system message,
no demo persona, tools or memories), a sample one with the sample data's blocks, and any one with the
lab's blocks only when asked."""
import json

import pytest

from memorylab import FileProvider, Session, load_samples
from memorylab.context.render import RULE
from memorylab.history.budget import prompt_and_tool_rows
from memorylab.importers import import_source
from memorylab.io import export_session, import_session
from memorylab.llm.chat import build_request
from memorylab.samples import SAMPLE_CONTEXT_LABELS, SOUL_PATH, with_sample_context
from memorylab.session_context import (
    IMPORTED,
    RECORDED,
    SAMPLE,
    block_sources,
    request_sources,
    session_origin,
    with_session_context,
)

SOUL = SOUL_PATH.read_text(encoding="utf-8").splitlines()[0]
CONVERSATION = [
    {"role": "system", "content": "You are Quill, a terse release-notes bot."},
    {"role": "user", "content": "Summarize 2.3.1 in one line."},
    {"role": "assistant", "content": "2.3.1 fixes the CSV importer's encoding crash."},
]


@pytest.fixture
def imported(store, tmp_path):
    """A session imported from an OpenAI message list, its system prompt the first message."""
    path = tmp_path / "release-bot.json"
    path.write_text(json.dumps(CONVERSATION), encoding="utf-8")
    session_import = import_source(store, path).sessions[0]
    return Session.open(store, session_import.session_id, agent_id=session_import.agent_id)


def test_an_imported_session_runs_with_its_own_system_prompt_and_nothing_of_the_sample(imported):
    assert session_origin(imported.info).kind == IMPORTED
    assert "OpenAI" in session_origin(imported.info).description
    session = with_session_context(imported)
    request = build_request(session)
    assert request["messages"][0] == {"role": "system", "content": "You are Quill, a terse release-notes bot."}
    assert request["tools"] == [] and SOUL not in json.dumps(request)
    assert prompt_and_tool_rows(session) == []  # the request is the branch, nothing added


def test_a_sample_session_runs_with_the_sample_data_as_its_own_context(store):
    load_samples(store)
    sample = Session.open(store, "support-order-4471", agent_id="support-bot")
    assert session_origin(sample.info).kind == SAMPLE
    memory_sample = Session.open(store, "id:lead-7731", agent_id="sales-assistant")  # a memory-manager sample
    assert session_origin(memory_sample.info).description.endswith("(sample_data/memories.json)")
    session = with_session_context(sample)
    assert [c.label for c in session.context.configs] == list(SAMPLE_CONTEXT_LABELS)
    assert SOUL in build_request(session)["messages"][0]["content"]
    assert block_sources(session, lab_context=True)["soul"] == "the lab's sample context: file sample_data/soul.md"
    frozen = session.freeze_system_prompt()
    session.replace_context_block("memory", "Customer prefers email.")
    reopened = with_session_context(Session.open(store, "support-order-4471", agent_id="support-bot"))
    assert reopened.freeze_system_prompt() == frozen  # an edited block waits for a refresh between turns
    assert [c.label for c in reopened.context.configs] == list(SAMPLE_CONTEXT_LABELS)


def test_the_lab_context_is_attached_only_on_purpose(imported):
    assert with_session_context(imported).freeze_system_prompt() == ""  # frozen, and stored, for its own context
    imported = Session.open(imported.store, imported.session_id, agent_id=imported.agent_id)
    session = with_session_context(imported, lab_context=True)
    assert SOUL in build_request(session)["messages"][0]["content"]
    sources = block_sources(session, lab_context=True)
    assert set(sources) == set(SAMPLE_CONTEXT_LABELS)
    assert sources["knowledge"] == "the lab's sample context: search index 'knowledge' of the database"
    assert sources["skills"] == "the lab's sample context: skills folder sample_data/skills"
    reopened = Session.open(imported.store, imported.session_id, agent_id=imported.agent_id)
    assert with_session_context(reopened, lab_context=False).freeze_system_prompt() == ""


def test_a_prompt_frozen_for_the_lab_context_is_rendered_again_for_the_own_one(imported):
    """A session chatted with the sample's blocks kept their frozen prompt in its row."""
    with_sample_context(imported).with_frozen_prompt_store().freeze_system_prompt()
    reopened = Session.open(imported.store, imported.session_id, agent_id=imported.agent_id)
    assert with_session_context(reopened).freeze_system_prompt() == ""
    assert reopened.storage.blocks.frozen_prompt() == ""


def test_a_recorded_sessions_stored_blocks_are_its_own_and_a_block_edit_keeps_the_frozen_prompt(store):
    session = Session.create(store, "notes", agent_id="notes-bot").with_context("style")
    session.replace_context_block("style", "Answer in French.")
    session.append_message({"role": "user", "content": "Bonjour"})
    copy = import_session(store, export_session(session), session_id="notes-copy")
    assert session_origin(copy.info).kind == RECORDED
    own = with_session_context(copy)
    assert "Answer in French." in own.freeze_system_prompt()
    assert [tool["function"]["name"] for tool in own.openai_tools()] == ["set_context"]
    own.replace_context_block("style", "Answer in German.")
    again = with_session_context(Session.open(store, "notes-copy", agent_id="notes-bot"))
    assert "Answer in French." in again.freeze_system_prompt()  # frozen until refreshed, between turns
    rows = request_sources(again, prompt_and_tool_rows(again), lab_context=False)
    assert [(row["item"], row["source"]) for row in rows] == [
        ("style", "this session: text stored with the session"), ("set_context", "made for the block style")]


def _frozen_then_edited(store, rules, before, after, *, style="Style"):
    """A recorded session with a stored block ``style`` and a readonly block ``rules`` (a file): its
    prompt frozen with ``before`` in the stored block, which then reads ``after``; reopened with its
    own context, it gives the prompt it would send."""
    def opened():
        session = Session.open(store, "notes", agent_id="notes-bot")
        return with_session_context(session.with_context("rules", provider=FileProvider(rules)))

    Session.create(store, "notes", agent_id="notes-bot").with_context(style).replace_context_block(style, before)
    opened().freeze_system_prompt()
    opened().replace_context_block(style, after)
    return opened().freeze_system_prompt()


def test_a_prompt_frozen_without_an_empty_readonly_block_stays_frozen(store, tmp_path):
    prompt = _frozen_then_edited(store, tmp_path / "rules.md", "Answer in French.", "Answer in German.")
    assert "Answer in French." in prompt and "RULES" not in prompt


def test_a_readonly_block_emptied_since_the_prompt_froze_renders_it_again(store, tmp_path):
    rules = tmp_path / "rules.md"
    rules.write_text("Never guess.", encoding="utf-8")
    Session.create(store, "notes", agent_id="notes-bot").with_context("Style").replace_context_block("Style", "French")
    with_session_context(Session.open(store, "notes", agent_id="notes-bot")
                         .with_context("rules", provider=FileProvider(rules))).freeze_system_prompt()
    rules.write_text("", encoding="utf-8")
    reopened = Session.open(store, "notes", agent_id="notes-bot").with_context("rules", provider=FileProvider(rules))
    assert "Never guess." not in with_session_context(reopened).freeze_system_prompt()


def test_a_block_whose_text_holds_a_section_rule_keeps_the_frozen_prompt(store, tmp_path):
    prompt = _frozen_then_edited(store, tmp_path / "rules.md", f"French\n\n{RULE}\nNOTE one",
                                 f"German\n\n{RULE}\nNOTE two", style="style")
    assert "French" in prompt and "German" not in prompt


class CountedIndex:
    """A searchable block that counts the reads of its text."""

    def __init__(self):
        self.reads = 0

    def get(self):
        self.reads += 1
        return "3 entries indexed."

    def search(self, query):
        return "No entries."


def test_reopening_a_session_frozen_for_its_context_reads_no_block_but_the_readonly_ones(store):
    Session.create(store, "notes", agent_id="notes-bot")
    opened = Session.open(store, "notes", agent_id="notes-bot").with_context("Index", provider=CountedIndex())
    frozen = with_session_context(opened).freeze_system_prompt()
    index = CountedIndex()
    reopened = Session.open(store, "notes", agent_id="notes-bot").with_context("Index", provider=index)
    configured = index.reads
    assert with_session_context(reopened).freeze_system_prompt() == frozen and index.reads == configured
