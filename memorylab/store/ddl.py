"""The declared schema (``schema``) in SQLite's and PostgreSQL's SQL, and how each backend records and
guards its migrations.

A DDL object wraps one connection; ``migrations`` hands it to every migration as ``db``. While a
migration runs, ``db.migration`` is its name: ``create`` leaves out the columns, indexes and search
that a later migration adds (they declare ``since``), and ``add`` writes the ones this migration brings.
"""
from contextlib import contextmanager
from typing import ClassVar

from .schema import INTEGER, JSON, POSTGRES_FUNCTIONS, REAL, TEXT, TIMESTAMP


class DDL:
    """What both backends write alike. A subclass gives its types, its generated key and its search,
    and for ``migrations.migrate`` where it records the version (``version``, ``record``) and how it
    keeps a second process out while migrating (``exclusive``)."""

    dialect: ClassVar[str]
    """``"sqlite"`` or ``"postgresql"``: the backend an index declared ``only`` for is kept by."""
    TYPES: ClassVar[dict] = {}
    IDENTITY = ""
    """The column definition of a generated key, ``{}`` standing for its name."""

    def __init__(self, conn):
        self.conn = conn
        self.migration = None

    def execute(self, sql):
        self.conn.execute(sql)

    def create(self, *tables):
        """Create each table with its indexes and search, less what a later migration adds."""
        for table in tables:
            lines, search = self._parts(table, None)
            if not table.identity:
                lines.append(f"PRIMARY KEY ({', '.join(table.key)})")
            lines += [f"UNIQUE ({', '.join(columns)})" for columns in table.unique]
            if table.check:
                lines.append(f"CHECK ({table.check})")
            self.execute(f"CREATE TABLE {table.name} (\n    " + ",\n    ".join(lines) + "\n)")
            for index in self._indexes(table, None):
                self.execute(self._index_sql(table, index))
            for sql in self._search_objects(table, search):
                self.execute(sql)

    def add(self, table):
        """Add to an existing ``table`` the columns, indexes and search declared ``since`` the running
        migration."""
        definitions, search = self._parts(table, self.migration)
        indexes = self._indexes(table, self.migration)
        if not definitions and not search and not indexes:
            raise ValueError(f"{self.migration} adds to {table.name}, but nothing there is declared since it")
        for definition in definitions:
            self.execute(f"ALTER TABLE {table.name} ADD COLUMN {definition}")
        for index in indexes:
            self.execute(self._index_sql(table, index))
        for sql in self._search_objects(table, search):
            self.execute(sql)

    def _parts(self, table, since):
        """The column definitions of ``table`` declared ``since`` a migration (None: with the table),
        its search's included when that came then too, and that search or None."""
        search = table.search if table.search and table.search.since == since else None
        if search:
            self._prepare_search()
        columns = [self._column(table, column) for column in table.columns if column.since == since]
        return columns + self._search_columns(search), search

    def _indexes(self, table, since):
        """The indexes of ``table`` this backend keeps that came with the migration ``since`` (None:
        with the table)."""
        return [index for index in table.indexes if index.since == since and index.only in (None, self.dialect)]

    @staticmethod
    def _index_sql(table, index):
        return (f"CREATE {'UNIQUE ' if index.unique else ''}INDEX {index.name} ON {table.name}"
                f" ({', '.join(index.columns)}){f' WHERE {index.where}' if index.where else ''}")

    def _column(self, table, column):
        if column.name == table.identity:
            return self.IDENTITY.format(column.name)
        sql = f"{column.name} {self.TYPES[column.type]}"
        if not column.null:
            sql += " NOT NULL"
        if column.references:
            sql += f" REFERENCES {column.references} ON DELETE CASCADE"
        if column.default is not None:
            sql += " DEFAULT '" + column.default.replace("'", "''") + "'"
        return sql

    def _prepare_search(self):
        """Whatever a search needs before its table or column can be written."""

    def _search_columns(self, search):
        """Column definitions that ``search`` adds to its table."""
        return []

    def _search_objects(self, table, search):
        """The statements that build ``search`` once its table has its columns."""
        return []


_TOKENIZE = "tokenize='unicode61 remove_diacritics 2'"
"""FTS5 splits words at Unicode letters and digits and folds accents: "café" is found by "cafe"."""


class SQLiteDDL(DDL):
    """``PRAGMA user_version`` holds the number of migrations applied. The DDL is written out rather
    than through sqlite-utils' helpers, which commit between statements."""

    dialect = "sqlite"
    TYPES: ClassVar[dict] = {TEXT: "TEXT", JSON: "TEXT", TIMESTAMP: "TEXT", INTEGER: "INTEGER", REAL: "REAL"}
    IDENTITY = "{} INTEGER PRIMARY KEY"

    def version(self):
        return self.conn.execute("PRAGMA user_version").fetchone()[0]

    def record(self, version):
        self.conn.execute(f"PRAGMA user_version = {int(version)}")

    @contextmanager
    def exclusive(self):
        """One ``BEGIN IMMEDIATE`` transaction: two processes opening a new file cannot both migrate it,
        and a crash midway leaves the previous version intact."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def _search_objects(self, table, search):
        """An FTS5 table over the searched columns, and the triggers that keep it in step with the rows."""
        if search is None:
            return []
        index, columns, key = f"{table.name}_fts", ", ".join(search.fts5), table.identity
        content = "content=''" if search.computed else f"content='{table.name}', content_rowid='{key}'"

        def values(row):
            return ", ".join([f"{row}.{key}"] + [search.computed.get(name, "{row}." + name).replace("{row}", row)
                                                 for name in search.fts5])

        insert = f"INSERT INTO {index} (rowid, {columns}) VALUES ({values('new')});"
        delete = f"INSERT INTO {index} ({index}, rowid, {columns}) VALUES ('delete', {values('old')});"
        of = f" OF {', '.join(search.update_of)}" if search.update_of else ""
        return [
            f"CREATE VIRTUAL TABLE {index} USING fts5({columns}, {content}, {_TOKENIZE})",
            f"CREATE TRIGGER {index}_insert AFTER INSERT ON {table.name} BEGIN\n    {insert}\nEND",
            f"CREATE TRIGGER {index}_delete AFTER DELETE ON {table.name} BEGIN\n    {delete}\nEND",
            f"CREATE TRIGGER {index}_update AFTER UPDATE{of} ON {table.name} BEGIN\n    {delete}\n    {insert}\nEND",
        ]


_MIGRATION_LOCK = 7_270_611_024  # any constant: the advisory lock that serializes migrations
_FIRST_RELEASE = {1: 6}
"""PostgreSQL's first release created its whole schema at once and recorded it as version 1: the schema
the shared migrations reach at m006."""


class PostgresDDL(DDL):
    """The number of migrations applied lives in a ``memorylab_schema`` table. Searchable rows carry a
    stored, generated ``tsvector`` with a GIN index instead of FTS5 tables and triggers, so the index
    can never drift from its rows."""

    dialect = "postgresql"
    TYPES: ClassVar[dict] = {TEXT: "TEXT", JSON: "TEXT", TIMESTAMP: "TEXT", INTEGER: "BIGINT",
                             REAL: "DOUBLE PRECISION"}
    IDENTITY = "{} BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"

    def __init__(self, conn):
        super().__init__(conn)
        self._functions_ready = False

    def version(self):
        if self.conn.execute("SELECT to_regclass('memorylab_schema')").fetchone()[0] is None:
            return 0
        row = self.conn.execute("SELECT version FROM memorylab_schema").fetchone()
        version = row[0] if row else 0
        return _FIRST_RELEASE.get(version, version)

    def record(self, version):
        if self.conn.execute("UPDATE memorylab_schema SET version = %s", (version,)).rowcount == 0:
            self.conn.execute("INSERT INTO memorylab_schema (version) VALUES (%s)", (version,))

    @contextmanager
    def exclusive(self):
        """One transaction (``conn`` is in autocommit) under an advisory lock, so servers started side
        by side cannot migrate twice. Creating the record table here also makes ``version`` see one that
        another server created while this one waited: a name looked up before the wait stays cached
        until a statement takes a lock on a relation."""
        with self.conn.transaction():
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            self.conn.execute("CREATE TABLE IF NOT EXISTS memorylab_schema (version INTEGER NOT NULL)")
            yield

    def _prepare_search(self):
        if not self._functions_ready:
            for sql in POSTGRES_FUNCTIONS:
                self.execute(sql)
            self._functions_ready = True

    def _search_columns(self, search):
        return [] if search is None else [f"tsv tsvector GENERATED ALWAYS AS ({search.tsvector}) STORED"]

    def _search_objects(self, table, search):
        return [] if search is None else [f"CREATE INDEX {table.name}_search ON {table.name} USING gin (tsv)"]
