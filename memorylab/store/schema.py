"""The schema, declared once: every table, column, key and index, for SQLite and PostgreSQL alike.

``ddl`` writes these declarations in each backend's SQL, ``migrations`` applies them in order and
``bulk`` copies exactly the columns declared here. Types are logical (a JSON document and a
timestamp are text on both backends). What a backend does its own way is declared beside the table
it belongs to: how the rows are searched (``Search``) and an index only one backend keeps. A column,
index or search that came after its table names the migration that added it (``since``), so creating the
table in its first migration leaves it out and that migration's ``db.add`` adds it.
"""
from dataclasses import dataclass, field

TEXT = "text"
JSON = "json"  # text holding a JSON document
TIMESTAMP = "timestamp"  # an ISO-8601 instant as text, as ``messages.utc_now_iso`` writes it
INTEGER = "integer"
REAL = "real"

INDEXED_CHARACTERS = 100_000
"""How much of one text PostgreSQL indexes: a ``tsvector`` is capped at 1 MB, and a message can be 10."""


def sqlite_json_words(expression):
    """SQLite: the scalar values of a JSON text as one text, keys left out (what the memory index
    holds, and what substring recall searches)."""
    return f"COALESCE((SELECT group_concat(atom, ' ') FROM json_tree({expression}) WHERE atom IS NOT NULL), '')"


@dataclass(frozen=True)
class Column:
    name: str
    type: str = TEXT
    null: bool = False
    default: str | None = None
    references: str | None = None
    """``"sessions(pk)"``: the parent row, whose deletion deletes this one (ON DELETE CASCADE)."""
    since: str | None = None


@dataclass(frozen=True)
class Index:
    name: str
    columns: tuple
    unique: bool = False
    where: str | None = None
    only: str | None = None
    """The one backend (``ddl`` dialect name) that keeps this index; None for both."""
    since: str | None = None


@dataclass(frozen=True)
class Search:
    """How a table's rows are found by their words: an FTS5 table kept by triggers on SQLite, a
    generated ``tsv`` column with a GIN index on PostgreSQL.

    ``fts5`` names the FTS5 columns; ``computed`` gives, for some of them, the SQL that derives the
    value from the trigger's row ``{row}`` (the others copy the row's column of that name). With no
    computed value the index is external-content (FTS5 reads the text back from the table, keeping no
    second copy); with one it is contentless. ``update_of`` limits re-indexing to updates of these
    columns (empty: any update). ``tsvector`` is PostgreSQL's expression over the row's columns.
    """

    fts5: tuple
    tsvector: str
    computed: dict = field(default_factory=dict)
    update_of: tuple = ()
    since: str | None = None


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple
    key: tuple
    """The primary key; a single INTEGER column is generated (SQLite's rowid, a PostgreSQL identity)."""
    unique: tuple = ()
    check: str | None = None
    indexes: tuple = ()
    search: Search | None = None

    @property
    def identity(self):
        """The generated key column, or None when the key is given by the writer."""
        if len(self.key) == 1 and next(c for c in self.columns if c.name == self.key[0]).type == INTEGER:
            return self.key[0]
        return None

    @property
    def other_columns(self):
        """The stored columns outside the primary key, in declared order."""
        return tuple(column.name for column in self.columns if column.name not in self.key)


def _words(expression):
    """PostgreSQL: the words of a text, folded as SQLite's ``remove_diacritics`` folds them."""
    return f"to_tsvector('simple', memorylab_fold(left({expression}, {INDEXED_CHARACTERS})))"


SESSION_PK = Column("session_pk", INTEGER, references="sessions(pk)")

AGENTS = Table(
    # name_key is the casefolded name: names match case-insensitively beyond ASCII, which NOCASE cannot.
    "agents", key=("tenant_id", "agent_id"), columns=(
        Column("tenant_id"), Column("agent_id"), Column("name", null=True), Column("name_key", null=True),
        Column("slug", null=True), Column("created_at", TIMESTAMP),
    ), indexes=(
        Index("agents_slug", ("tenant_id", "slug"), unique=True, where="slug IS NOT NULL"),
        Index("agents_name", ("tenant_id", "name_key"), where="name_key IS NOT NULL"),
    ),
)

SESSIONS = Table(
    "sessions", key=("pk",), unique=(("tenant_id", "agent_id", "session_id"),), columns=(
        Column("pk", INTEGER), Column("tenant_id"), Column("agent_id"), Column("session_id"),
        Column("created_at", TIMESTAMP), Column("updated_at", TIMESTAMP), Column("metadata", JSON, default="{}"),
        # A frozen system prompt, so it survives restarts.
        Column("cached_prompt", null=True, since="m003_context_storage"),
        # The append path reads the newest message here instead of probing an index every insert maintains.
        Column("latest_message_id", null=True, since="m004_track_latest_message"),
        Column("status", null=True, since="m005_memory_manager"),
    ),
)

# seq is the insertion order: the newest message of a session is always a leaf, because a child can
# only be written after its parent.
#
# continues lays a branch out in stretches: it is 1 when a message's parent is the message of its
# session stored just before it (an append under the newest message, the usual case), so a stretch
# of such messages is one range of seq, and a branch is a few ranges found through the stretches'
# first messages (messages_stretch, which holds only those: an ordinary append adds no index entry)
# instead of one index lookup per message. Reads check that what they got links up and otherwise
# walk the parent links, so a stale flag costs speed, never a wrong history.
MESSAGES = Table(
    "messages", key=("seq",), unique=(("session_pk", "id"),), columns=(
        Column("seq", INTEGER), SESSION_PK, Column("id"), Column("parent_id", null=True), Column("role"),
        Column("parts", JSON), Column("text"), Column("created_at", TIMESTAMP), Column("metadata", JSON),
        Column("tokens", INTEGER), Column("continues", INTEGER, default="0", since="m007_branch_stretches"),
    ), indexes=(
        # SQLite dropped its index on session_pk in m004: the newest message is read from the session row.
        Index("messages_session", ("session_pk", "seq"), only="postgresql"),
        Index("messages_parent", ("session_pk", "parent_id")),
        Index("messages_stretch", ("session_pk", "seq"), where="continues = 0", since="m007_branch_stretches"),
    ), search=Search(("text",), _words("text"), update_of=("text",), since="m002_message_search"),
)

COMPACTIONS = Table(
    "compactions", key=("session_pk", "id"), columns=(
        SESSION_PK, Column("id", INTEGER), Column("from_id"), Column("to_id"), Column("summary"),
        Column("created_at", TIMESTAMP), Column("metadata", JSON, default="{}"),
    ),
)

# A pin keeps a message out of every compaction's summary (``history.pins``). It names the message by
# id, as an overlay does; deleting the message deletes its pin.
MESSAGE_PINS = Table(
    "message_pins", key=("session_pk", "message_id"), columns=(
        SESSION_PK, Column("message_id"), Column("note", default=""), Column("pinned_at", TIMESTAMP),
    ),
)

CONTEXT_BLOCKS = Table(
    "context_blocks", key=("session_pk", "label"), columns=(
        SESSION_PK, Column("label"), Column("content"), Column("updated_at", TIMESTAMP),
    ),
)

SKILL_ACTIVATIONS = Table(
    "skill_activations", key=("session_pk", "label", "key"), columns=(
        SESSION_PK, Column("label"), Column("key"), Column("activated_at", TIMESTAMP),
    ),
)

SEARCH_ENTRIES = Table(
    "search_entries", key=("pk",), unique=(("tenant_id", "namespace", "key"),), columns=(
        Column("pk", INTEGER), Column("tenant_id"), Column("namespace"), Column("key"), Column("content"),
        Column("updated_at", TIMESTAMP),
    ), search=Search(("key", "content"), _words("key || ' ' || content")),
)

KV_ENTRIES = Table(
    "kv_entries", key=("pk",), unique=(("tenant_id", "namespace", "key"),), columns=(
        Column("pk", INTEGER), Column("tenant_id"), Column("namespace"), Column("key"), Column("value", JSON),
        Column("expires_at", TIMESTAMP, null=True), Column("created_at", TIMESTAMP),
        Column("updated_at", TIMESTAMP),
    ), indexes=(
        Index("kv_entries_expiry", ("tenant_id", "namespace", "expires_at"), where="expires_at IS NOT NULL"),
    ),
)

# Long-term memory records of every workspace (``collection`` is always "memory"). ``kind`` is the
# record's ``scope`` lower-cased, a second name for it; the CHECK keeps them and ``session_id`` in step, so a
# session memory can never lose the session that owns it. Searched are the summary, the scalar values
# of the body (its keys are the same in every record, so they would match every query) and the tags:
# on SQLite a contentless index (the flattened words exist in no column), weighted at query time; on
# PostgreSQL weights A (the summary), B (the tags) and D (the body).
MEMORY_RECORDS = Table(
    "memory_records", key=("pk",), columns=(
        Column("pk", INTEGER), Column("workspace"), Column("collection", default="memory"), Column("kind"),
        Column("scope"), Column("session_id", null=True), Column("summary"), Column("body", JSON, default="{}"),
        Column("tags", JSON, default="[]"), Column("importance", REAL), Column("provenance", JSON, default="{}"),
        Column("vector_index", JSON, default="{}"), Column("created_at", TIMESTAMP), Column("updated_at", TIMESTAMP),
    ),
    check="(kind = 'global_memory' AND scope = 'GLOBAL_MEMORY' AND session_id IS NULL)"
          " OR (kind = 'session_memory' AND scope = 'SESSION_MEMORY' AND session_id IS NOT NULL)",
    indexes=(Index("memory_records_scope", ("workspace", "scope", "session_id")),),
    search=Search(
        ("summary", "body", "tags"),
        f"setweight({_words('summary')}, 'A') || setweight({_words('memorylab_json_words(tags)')}, 'B')"
        f" || setweight({_words('memorylab_json_words(body)')}, 'D')",
        computed={
            "body": sqlite_json_words("{row}.body"),
            "tags": "COALESCE((SELECT group_concat(value, ' ') FROM json_each({row}.tags)), '')",
        },
        update_of=("summary", "body", "tags"),
    ),
)

# Experiments: arms x cases with probes, and every run kept. A case names its session by id rather
# than referencing the row, so deleting a session never deletes the record of what was measured on it;
# a run keeps its arm's settings and its probes' verdicts as they were, so editing the experiment later
# does not rewrite history. ``trial`` numbers the times the experiment was run. A run's context holds
# the messages it kept unchanged as references (``{"ref": id}``) to its branch, and whole only what
# the strategy wrote (a summary, a cut message): a run over a long session does not copy the session.
EXPERIMENT_PK = Column("experiment_pk", INTEGER, references="experiments(pk)")
EXPERIMENTS = Table(
    "experiments", key=("pk",), unique=(("tenant_id", "name"),), columns=(
        Column("pk", INTEGER), Column("tenant_id"), Column("name"), Column("description", default=""),
        Column("settings", JSON, default="{}"), Column("created_at", TIMESTAMP), Column("updated_at", TIMESTAMP),
    ),
)

EXPERIMENT_ARMS = Table(
    "experiment_arms", key=("experiment_pk", "name"), columns=(
        EXPERIMENT_PK, Column("name"), Column("position", INTEGER), Column("strategy"),
        Column("settings", JSON, default="{}"), Column("min_score", REAL, null=True),
    ),
)

EXPERIMENT_CASES = Table(
    "experiment_cases", key=("experiment_pk", "name"), columns=(
        EXPERIMENT_PK, Column("name"), Column("position", INTEGER), Column("tenant_id"), Column("agent_id"),
        Column("session_id"), Column("leaf_id", null=True),
    ),
)

EXPERIMENT_PROBES = Table(
    "experiment_probes", key=("experiment_pk", "case_name", "probe_id"), columns=(
        EXPERIMENT_PK, Column("case_name"), Column("probe_id"), Column("position", INTEGER), Column("kind"),
        Column("question"), Column("facts", JSON, default="[]"), Column("answer", null=True),
    ),
)

EXPERIMENT_RUNS = Table(
    "experiment_runs", key=("pk",), unique=(("experiment_pk", "trial", "arm", "case_name"),), columns=(
        Column("pk", INTEGER), EXPERIMENT_PK, Column("trial", INTEGER), Column("arm"), Column("strategy"),
        Column("arm_settings", JSON, default="{}"), Column("case_name"), Column("tenant_id"), Column("agent_id"),
        Column("session_id"),
        Column("leaf_id", null=True), Column("context", JSON, default="[]"), Column("summary", null=True),
        Column("request", JSON, null=True), Column("scores", JSON, default="[]"), Column("score", REAL, null=True),
        Column("tokens_before", INTEGER), Column("tokens_after", INTEGER), Column("summary_tokens", INTEGER),
        Column("usage", JSON, default="{}"), Column("cost", REAL, null=True), Column("latency", REAL),
        Column("model", null=True), Column("error", null=True), Column("started_at", TIMESTAMP),
        Column("finished_at", TIMESTAMP),
    ),
)

# A person's verdict on one probe of one arm's output (``Experiments.label``): ``correct`` is 1 when the
# output truly keeps (or, graded, answers) what the probe asks, so the probe should pass; ``grade`` is
# the person's own 0-1 grade of a graded answer. A label is keyed by what it judges, never by the run:
# the case, the arm, the probe and ``output``, the digest of the context the arm left (and of the
# answer, for a graded probe), so a re-run that leaves the same output shows the label again and one
# that leaves another shows it as stale. ``trial`` is the trial it was last given on.
EXPERIMENT_LABELS = Table(
    "experiment_labels", key=("experiment_pk", "case_name", "arm", "probe_id", "output"), columns=(
        EXPERIMENT_PK, Column("case_name"), Column("arm"), Column("probe_id"), Column("output"),
        Column("trial", INTEGER), Column("correct", INTEGER), Column("grade", REAL, null=True),
        Column("labelled_by"), Column("labelled_at", TIMESTAMP),
    ),
)

# Another judge model's verdicts on a finished trial's stored answers (``Experiments.regrade``): the
# run's own judge's verdicts stay in its ``scores``.
EXPERIMENT_GRADES = Table(
    "experiment_grades", key=("experiment_pk", "trial", "arm", "case_name", "probe_id", "judge_model"), columns=(
        EXPERIMENT_PK, Column("trial", INTEGER), Column("arm"), Column("case_name"), Column("probe_id"),
        Column("judge_model"), Column("score", REAL, null=True), Column("judge_output"),
        Column("graded_at", TIMESTAMP),
    ),
)

# Rows that ``memorylab check --repair`` set aside because they could not be read: the table a row came
# from, its key there (a JSON object of the key columns), the whole row as it was stored (a JSON object
# of its columns, the damaged text kept to the character), why, and when. Nothing here is read by the
# engine; it is kept so that no repair deletes anything.
QUARANTINE = Table(
    "quarantine", key=("pk",), columns=(
        Column("pk", INTEGER), Column("table_name"), Column("row_key", JSON), Column("row", JSON),
        Column("reason"), Column("quarantined_at", TIMESTAMP),
    ),
)

TABLES = (AGENTS, SESSIONS, MESSAGES, COMPACTIONS, MESSAGE_PINS, CONTEXT_BLOCKS, SKILL_ACTIVATIONS, SEARCH_ENTRIES,
          KV_ENTRIES, MEMORY_RECORDS, EXPERIMENTS, EXPERIMENT_ARMS, EXPERIMENT_CASES, EXPERIMENT_PROBES,
          EXPERIMENT_RUNS, QUARANTINE, EXPERIMENT_LABELS, EXPERIMENT_GRADES)
"""Every table; parents come before the tables that reference them."""

POSTGRES_FUNCTIONS = (
    # Accents go the way SQLite's remove_diacritics takes them: decompose (NFD), drop the combining
    # marks. Plain ASCII, most text, skips both (a per-character translate() cost 0.8 ms a message).
    r"""CREATE OR REPLACE FUNCTION memorylab_fold(input text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT CASE WHEN input ~ '^[\x01-\x7f]*$' THEN input
            ELSE regexp_replace(normalize(input, NFD), '[\u0300-\u036f]', '', 'g') END $$""",
    # The scalar values of a JSON document as words (its keys repeat in every record, so they would
    # match every query); text that is not valid JSON is searched as it is.
    """CREATE OR REPLACE FUNCTION memorylab_json_words(document text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
    BEGIN
        RETURN COALESCE((SELECT string_agg(value #>> '{}', ' ')
            FROM jsonb_path_query(CAST(document AS jsonb), 'strict $.**') AS value
            WHERE jsonb_typeof(value) NOT IN ('object', 'array', 'null')), '');
    EXCEPTION WHEN others THEN
        RETURN document;
    END $$""",
)
"""What PostgreSQL's search expressions call; created before the first search that needs them."""
