import pytest

from memorylab import (
    BlockBudgetError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    ReadOnlyBlockError,
    Session,
    Store,
)
from memorylab.context import (
    FileProvider,
    SkillDirectoryProvider,
    SqliteSearchProvider,
    StaticProvider,
    render_system_prompt,
)
from memorylab.store.context import text_version

RULE = "═" * 46

SEED_FIRST = f"""{RULE}
MEMORY (Important facts learned during conversation) [45% — 495/1100 tokens] [writable]
{RULE}
User prefers dark mode.
User's project uses React and TypeScript.
Deployment target is Cloudflare Workers.

{RULE}
TODOS (Task list) [12% — 240/2000 tokens] [writable]
{RULE}
- [x] Set up project scaffolding
- [ ] Add authentication middleware
- [ ] Write integration tests"""

SEED_SECOND = f"""{RULE}
SOUL (Identity) [readonly]
{RULE}
You are a helpful coding assistant who speaks concisely.

{RULE}
MEMORY (Important facts) [45% — 495/1100 tokens] [writable]
{RULE}
User prefers dark mode.
User's project uses React and TypeScript.

{RULE}
KNOWLEDGE (Searchable knowledge base) [searchable]
{RULE}
12 entries indexed."""


def block(label, content, kind, description=None, tokens=0, max_tokens=None):
    return {"label": label, "content": content, "kind": kind, "description": description,
            "tokens": tokens, "max_tokens": max_tokens}


def test_seed_examples_render_character_for_character():
    first = [
        block("memory", "User prefers dark mode.\nUser's project uses React and TypeScript.\n"
              "Deployment target is Cloudflare Workers.", "writable",
              "Important facts learned during conversation", 495, 1100),
        block("todos", "- [x] Set up project scaffolding\n- [ ] Add authentication middleware\n"
              "- [ ] Write integration tests", "writable", "Task list", 240, 2000),
    ]
    assert render_system_prompt(first) == SEED_FIRST
    second = [
        block("soul", "You are a helpful coding assistant who speaks concisely.", "readonly", "Identity"),
        block("memory", "User prefers dark mode.\nUser's project uses React and TypeScript.", "writable",
              "Important facts", 495, 1100),
        block("knowledge", "12 entries indexed.", "searchable", "Searchable knowledge base"),
    ]
    assert render_system_prompt(second) == SEED_SECOND


def test_second_seed_example_from_a_real_session(store):
    knowledge = SqliteSearchProvider(store)
    for i in range(12):
        knowledge.set(f"doc-{i}", f"entry number {i}")
    session = (Session.create(store, "seed")
               .with_context("soul", description="Identity",
                             provider=StaticProvider("You are a helpful coding assistant who speaks concisely."))
               .with_context("memory", description="Important facts", max_tokens=1100)
               .with_context("knowledge", description="Searchable knowledge base", provider=knowledge))
    session.replace_context_block("memory", "User prefers dark mode.\nUser's project uses React and TypeScript.")
    tokens = session.get_context_block("memory")["tokens"]
    expected = SEED_SECOND.replace("[45% — 495/1100 tokens]", f"[{round(tokens * 100 / 1100)}% — {tokens}/1100 tokens]")
    assert session.freeze_system_prompt() == expected


@pytest.mark.parametrize("tokens, limit, percent", [(1, 200, 1), (1, 400, 0), (5, 1000, 1), (45, 1000, 5),
                                                     (495, 1100, 45), (11, 22, 50), (1100, 1100, 100)])
def test_percent_rounds_half_up(tokens, limit, percent):
    rendered = render_system_prompt([block("m", "x", "writable", None, tokens, limit)])
    assert f"[{percent}% — {tokens}/{limit} tokens]" in rendered


def test_empty_readonly_blocks_are_left_out_but_empty_writable_blocks_stay():
    rendered = render_system_prompt([block("soul", "", "readonly"), block("notes", "", "writable"),
                                     block("kb", "  ", "readonly")])
    assert rendered == f"{RULE}\nNOTES [writable]\n{RULE}\n"


def test_block_dicts_report_kind_and_budget(store, tmp_path):
    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "deploy.md").write_text("# Deploy\nHow to ship a release.\n\nStep 1...")
    session = (Session.create(store, "kinds")
               .with_context("soul", provider=StaticProvider("I am."))
               .with_context("memory", description="facts", max_tokens=50)
               .with_context("kb", provider=SqliteSearchProvider(store))
               .with_context("skills", provider=SkillDirectoryProvider(tmp_path / "skills")))
    blocks = {b["label"]: b for b in session.get_context_blocks()}
    assert list(blocks) == ["soul", "memory", "kb", "skills"]
    assert blocks["soul"] | {} == {"label": "soul", "description": None, "content": "I am.", "tokens": 3,
                                   "version": text_version("I am."),
                                   "max_tokens": None, "writable": False, "is_searchable": False,
                                   "is_skill": False, "kind": "readonly"}
    assert blocks["memory"]["writable"] and blocks["memory"]["max_tokens"] == 50
    assert blocks["kb"]["is_searchable"] and blocks["kb"]["writable"]
    assert blocks["kb"]["content"] == "0 entries indexed."
    assert blocks["skills"]["is_skill"] and blocks["skills"]["content"] == "- deploy: How to ship a release."


def test_budget_refusal_names_both_numbers_and_keeps_content(session):
    session.with_context("memory", max_tokens=10)
    session.replace_context_block("memory", "short fact")
    with pytest.raises(BlockBudgetError) as error:
        session.replace_context_block("memory", "word " * 40)
    assert "10 tokens" in str(error.value) and "52 tokens" in str(error.value)
    with pytest.raises(BlockBudgetError):
        session.append_context_block("memory", "another fact that is rather long indeed")
    assert session.get_context_block("memory")["content"] == "short fact"


def test_readonly_refusal_keeps_content(session):
    session.with_context("soul", provider=StaticProvider("fixed"))
    with pytest.raises(ReadOnlyBlockError):
        session.replace_context_block("soul", "changed")
    with pytest.raises(ReadOnlyBlockError):
        session.append_context_block("soul", "more")
    assert session.get_context_block("soul")["content"] == "fixed"


def test_append_joins_with_a_newline(session):
    session.with_context("todos")
    session.append_context_block("todos", "- [ ] one")
    session.append_context_block("todos", "- [ ] two")
    assert session.get_context_block("todos")["content"] == "- [ ] one\n- [ ] two"


def test_sqlite_blocks_are_per_session(store):
    a = Session.create(store, "a").with_context("memory")
    b = Session.create(store, "b").with_context("memory")
    a.replace_context_block("memory", "A's fact")
    assert b.get_context_block("memory")["content"] == ""
    assert Session.create(store, "a").with_context("memory").get_context_block("memory")["content"] == "A's fact"


def test_add_and_remove_context_at_run_time(session):
    session.add_context("scratch", description="temporary")
    session.replace_context_block("scratch", "keep me")
    with pytest.raises(ConflictError):
        session.add_context("scratch")
    session.remove_context("scratch")
    with pytest.raises(NotFoundError):
        session.get_context_block("scratch")
    assert session.add_context("scratch")["content"] == "keep me"
    with pytest.raises(NotFoundError):
        session.remove_context("never")


@pytest.mark.parametrize("label", ["", "1abc", "has space", "a;DROP", "x" * 65, None, "ünïcode"])
def test_bad_labels_and_budgets_are_refused(session, label):
    with pytest.raises(InvalidInputError):
        session.with_context(label)


@pytest.mark.parametrize("max_tokens", [0, -5, 1.5, "10", True])
def test_bad_budgets_are_refused(session, max_tokens):
    with pytest.raises(InvalidInputError):
        session.with_context("memory", max_tokens=max_tokens)


def test_provider_without_get_is_refused(session):
    class NoGet:
        def set(self, content):
            pass

    with pytest.raises(InvalidInputError, match="get"):
        session.with_context("bad", provider=NoGet())


def test_duck_typed_user_providers(session):
    class Notes:
        def __init__(self):
            self.text = "start"

        def get(self):
            return self.text

        def set(self, content):
            self.text = content

    notes = Notes()
    session.with_context("notes", provider=notes, max_tokens=20)
    session.append_context_block("notes", "more")
    assert notes.text == "start\nmore"
    assert session.get_context_block("notes")["kind"] == "writable"


def test_file_provider_reads_the_file_each_time(session, tmp_path):
    soul = tmp_path / "SOUL.md"
    soul.write_text("You are calm.")
    session.with_context("soul", provider=FileProvider(soul))
    assert session.get_context_block("soul")["content"] == "You are calm."
    soul.write_text("You are brisk.")
    assert session.get_context_block("soul")["content"] == "You are brisk."
    missing = FileProvider(tmp_path / "nope.md")
    assert missing.get() == ""


def test_freeze_refresh_and_the_frozen_prompt_store_across_stores(store_target):
    with Store(store_target) as store:
        s = Session.create(store, "frozen").with_context("memory", max_tokens=100).with_frozen_prompt_store()
        s.replace_context_block("memory", "first fact")
        frozen = s.freeze_system_prompt()
        s.replace_context_block("memory", "second fact")
        assert s.get_context_block("memory")["content"] == "second fact"  # stored at once
        assert s.freeze_system_prompt() == frozen  # but the prompt is unchanged
        assert "second fact" in s.render_system_prompt()
    with Store(store_target) as store:
        again = Session.create(store, "frozen").with_context("memory", max_tokens=100).with_frozen_prompt_store()
        assert again.freeze_system_prompt() == frozen
        refreshed = again.refresh_system_prompt()
        assert "second fact" in refreshed and again.freeze_system_prompt() == refreshed
    with Store(store_target) as store:
        # with_cached_prompt: the name DESIGN.md gives with_frozen_prompt_store
        third = Session.create(store, "frozen").with_context("memory", max_tokens=100).with_cached_prompt()
        assert third.freeze_system_prompt() == refreshed
        uncached = Session.create(store, "frozen").with_context("memory", max_tokens=100)
        assert uncached.freeze_system_prompt() == refreshed  # rendered fresh: same content now


def test_searchable_provider_search_hits_misses_and_keyed_set(store):
    kb = SqliteSearchProvider(store, namespace="kb")
    kb.set("returns", "Returns are accepted within 30 days with the DHL label.")
    kb.set("shipping", "Standard shipping takes 2-4 working days.")
    kb.set("returns", "Returns are accepted within 45 days.")
    assert kb.get() == "2 entries indexed."
    assert "45 days" in kb.search("returns days") and "30 days" not in kb.search("returns")
    assert kb.search("warranty") == "No entries match 'warranty'."
    assert kb.search('") OR NEAR(') == "No entries match '\") OR NEAR('."
    other = SqliteSearchProvider(store, namespace="other")
    assert other.get() == "0 entries indexed."
    assert kb.delete("shipping") and kb.get() == "1 entry indexed."


def test_skills_catalog_versus_loaded_body(tmp_path):
    skills = tmp_path / "skills"
    skills.mkdir()
    (skills / "refund.md").write_text("---\nname: refund\ndescription: Issue a refund step by step\n---\n"
                                      "# Refund\n1. Check the order.\n2. Refund the card.\n")
    (skills / "escalate.md").write_text("# Escalation\n\nWhen to hand over to a human.\n\nDetails here.")
    (tmp_path / "secret.md").write_text("do not leak")
    provider = SkillDirectoryProvider(skills)
    assert provider.get() == "- escalate: When to hand over to a human.\n- refund: Issue a refund step by step"
    assert "1. Check the order." in provider.load("refund")
    assert "description:" not in provider.load("refund")
    assert "1. Check the order." not in provider.get()
    for hostile in ("../secret", "refund.md", "/etc/passwd", ""):
        with pytest.raises(NotFoundError):
            provider.load(hostile)
