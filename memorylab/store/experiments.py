"""Experiment rows: a definition (arms, cases, probes) per tenant and name, and every run kept.

Saving a definition replaces its arms, cases and probes and never touches its runs. Values arrive as
plain Python (dicts and lists); JSON columns are written with the store's encoder and read back here.
A definition is read whole or not at all: a stored document of it that cannot be read is a
DamagedRowError naming the row. A list of runs leaves a damaged run out with a DamagedRowWarning.
"""
from __future__ import annotations

from .compare_and_set import MISSING, check_version, version_of
from .repository import Repository, insert_rows
from .rows import JSON_KINDS, dumps, read_json, readable

RUN_COLUMNS = ("trial", "arm", "strategy", "arm_settings", "case_name", "tenant_id", "agent_id", "session_id",
               "leaf_id", "context", "summary",
               "request", "scores", "score", "tokens_before", "tokens_after", "summary_tokens", "usage", "cost",
               "latency", "model", "error", "started_at", "finished_at")
_RUN_JSON = ("arm_settings", "context", "request", "scores", "usage")
_RUN_SUMMARY_COLUMNS = tuple(c for c in RUN_COLUMNS if c != "context")
"""Everything of a run but its context, which can be the whole branch: listings leave it out."""
_LABEL_COLUMNS = ("case_name", "arm", "probe_id", "output", "trial", "correct", "grade", "labelled_by", "labelled_at")
_GRADE_COLUMNS = ("trial", "arm", "case_name", "probe_id", "judge_model", "score", "judge_output", "graded_at")


def _loads(row, table, column, where):
    """The JSON document ``row[column]`` of ``table``; DamagedRowError naming ``where`` when unreadable."""
    return read_json(row[column], JSON_KINDS[table][column], where, column)


def _run_from_row(row):
    """A run with its JSON documents decoded; DamagedRowError when one cannot be read."""
    return {column: _loads(row, "experiment_runs", column, f"experiment run {row['pk']}") if column in _RUN_JSON
            else value for column, value in dict(row).items()}


class ExperimentRecords(Repository):
    # -- definitions ---------------------------------------------------------------------------------

    def save(self, tenant_id, definition, *, now, expected=None) -> int:
        """Create or replace the definition ``{"name", "description", "settings", "arms", "cases"}``
        (arms: ``{"name", "strategy", "settings", "min_score"}``; cases: ``{"name", "tenant_id",
        "agent_id", "session_id", "leaf_id", "probes": [{"id", "kind", "question", "facts", "answer"}]}``).
        Returns its key; its runs stay. With ``expected`` (the stored definition's ``version`` as read,
        ``MISSING`` for none), only while it is still at that version; else ``StaleWriteError`` with
        the stored definition."""
        name = definition["name"]
        on_conflict = " DO NOTHING" if expected == MISSING else (
            " DO UPDATE SET description = excluded.description, settings = excluded.settings,"
            " updated_at = excluded.updated_at")
        with self.transaction() as conn:
            if expected is not None:
                self._check_unchanged(conn, tenant_id, name, expected)
            row = conn.execute(
                "INSERT INTO experiments (tenant_id, name, description, settings, created_at, updated_at)"
                f" VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, name){on_conflict} RETURNING pk",
                (tenant_id, name, definition["description"], dumps(definition["settings"]), now, now),
            ).fetchone()
            if row is None:  # another writer created it since the check
                self._check_unchanged(conn, tenant_id, name, expected)
            pk = row[0]
            for table in ("experiment_arms", "experiment_cases", "experiment_probes"):
                conn.execute(f"DELETE FROM {table} WHERE experiment_pk = ?", (pk,))
            insert_rows(conn, "experiment_arms",
                        ("experiment_pk", "name", "position", "strategy", "settings", "min_score"),
                        [(pk, arm["name"], position, arm["strategy"], dumps(arm["settings"]), arm["min_score"])
                         for position, arm in enumerate(definition["arms"])])
            cases = definition["cases"]
            insert_rows(conn, "experiment_cases",
                        ("experiment_pk", "name", "position", "tenant_id", "agent_id", "session_id", "leaf_id"),
                        [(pk, case["name"], position, case["tenant_id"], case["agent_id"], case["session_id"],
                          case["leaf_id"]) for position, case in enumerate(cases)])
            insert_rows(conn, "experiment_probes",
                        ("experiment_pk", "case_name", "probe_id", "position", "kind", "question", "facts", "answer"),
                        [(pk, case["name"], probe["id"], position, probe["kind"], probe["question"],
                          dumps(probe["facts"]), probe["answer"])
                         for case in cases for position, probe in enumerate(case["probes"])])
        return pk

    @staticmethod
    def _lock(conn, where, params):
        """Lock the experiment's row until the transaction ends (PostgreSQL; SQLite's write transaction
        holds the whole file already)."""
        conn.execute(f"UPDATE experiments SET updated_at = updated_at WHERE {where}", params)

    def _check_unchanged(self, conn, tenant_id, name, expected):
        """Lock the experiment's row and refuse when its stored definition is not at version ``expected``."""
        self._lock(conn, "tenant_id = ? AND name = ?", (tenant_id, name))
        stored = self.definition(tenant_id, name)
        check_version(f"experiment {name!r}", expected, MISSING if stored is None else stored["version"], stored)

    def definition(self, tenant_id, name) -> dict | None:
        """What ``save`` was given (plus ``pk``, ``created_at``, ``updated_at`` and the ``version`` a
        guarded save compares), or None."""
        with self._store.snapshot() as conn:
            row = conn.execute("SELECT * FROM experiments WHERE tenant_id = ? AND name = ?",
                               (tenant_id, name)).fetchone()
            if row is None:
                return None
            pk, where = row["pk"], f"experiment {name!r}"
            arms = conn.execute("SELECT * FROM experiment_arms WHERE experiment_pk = ? ORDER BY position",
                                (pk,)).fetchall()
            cases = conn.execute("SELECT * FROM experiment_cases WHERE experiment_pk = ? ORDER BY position",
                                 (pk,)).fetchall()
            probes = conn.execute(
                "SELECT * FROM experiment_probes WHERE experiment_pk = ? ORDER BY case_name, position", (pk,)
            ).fetchall()
        by_case: dict[str, list[dict]] = {}
        for probe in probes:
            by_case.setdefault(probe["case_name"], []).append({
                "id": probe["probe_id"], "kind": probe["kind"], "question": probe["question"],
                "facts": _loads(probe, "experiment_probes", "facts", f"{where}, probe {probe['probe_id']!r}"),
                "answer": probe["answer"],
            })
        content = {
            "name": row["name"], "description": row["description"],
            "settings": _loads(row, "experiments", "settings", where),
            "arms": [{"name": arm["name"], "strategy": arm["strategy"], "min_score": arm["min_score"],
                      "settings": _loads(arm, "experiment_arms", "settings", f"{where}, arm {arm['name']!r}")}
                     for arm in arms],
            "cases": [{"name": case["name"], "tenant_id": case["tenant_id"], "agent_id": case["agent_id"],
                       "session_id": case["session_id"], "leaf_id": case["leaf_id"],
                       "probes": by_case.get(case["name"], [])} for case in cases],
        }
        return {"pk": pk, **content, "created_at": row["created_at"], "updated_at": row["updated_at"],
                "version": version_of(content)}

    def listing(self, tenant_id) -> list[dict]:
        """``[{"name", "description", "arms", "cases", "probes", "trials", "runs", "updated_at", "last_run"}]``
        of a tenant's experiments, newest change first."""
        rows = self._all(
            """SELECT e.name, e.description, e.updated_at,
                   (SELECT COUNT(*) FROM experiment_arms a WHERE a.experiment_pk = e.pk) AS arms,
                   (SELECT COUNT(*) FROM experiment_cases c WHERE c.experiment_pk = e.pk) AS cases,
                   (SELECT COUNT(*) FROM experiment_probes p WHERE p.experiment_pk = e.pk) AS probes,
                   (SELECT COUNT(DISTINCT trial) FROM experiment_runs r WHERE r.experiment_pk = e.pk) AS trials,
                   (SELECT COUNT(*) FROM experiment_runs r WHERE r.experiment_pk = e.pk) AS runs,
                   (SELECT MAX(finished_at) FROM experiment_runs r WHERE r.experiment_pk = e.pk) AS last_run
            FROM experiments e WHERE e.tenant_id = ? ORDER BY e.updated_at DESC, e.name""",
            (tenant_id,),
        )
        return [dict(row) for row in rows]

    def delete(self, tenant_id, name) -> bool:
        """Remove an experiment with everything it holds, its runs included."""
        with self.transaction() as conn:
            pk = conn.execute("SELECT pk FROM experiments WHERE tenant_id = ? AND name = ?",
                              (tenant_id, name)).fetchone()
            if pk is None:
                return False
            for table in ("experiment_labels", "experiment_grades", "experiment_runs", "experiment_probes",
                          "experiment_cases", "experiment_arms"):
                conn.execute(f"DELETE FROM {table} WHERE experiment_pk = ?", (pk[0],))
            conn.execute("DELETE FROM experiments WHERE pk = ?", (pk[0],))
        return True

    # -- runs ----------------------------------------------------------------------------------------

    def next_trial(self, experiment_pk) -> int:
        row = self._one("SELECT MAX(trial) AS trial FROM experiment_runs WHERE experiment_pk = ?", (experiment_pk,))
        return (row["trial"] or 0) + 1

    def trials(self, experiment_pk) -> list[dict]:
        """``[{"trial", "runs", "errors", "score", "started_at", "finished_at"}]``, oldest first; a failed
        run counts 0 in ``score``, the mean over runs."""
        rows = self._all(
            """SELECT trial, COUNT(*) AS runs, SUM(CASE WHEN error IS NULL THEN 0 ELSE 1 END) AS errors,
                   AVG(CASE WHEN error IS NULL THEN COALESCE(score, 0) ELSE 0 END) AS score,
                   MIN(started_at) AS started_at, MAX(finished_at) AS finished_at
            FROM experiment_runs WHERE experiment_pk = ? GROUP BY trial ORDER BY trial""",
            (experiment_pk,),
        )
        return [dict(row) for row in rows]

    def add_run(self, experiment_pk, run) -> int:
        """Store one arm's run on one case (``run`` has every key of ``RUN_COLUMNS``); returns its key."""
        with self.transaction() as conn:
            return self._insert_run(conn, experiment_pk, run)

    def open_trial(self, experiment_pk, run) -> tuple[int, int]:
        """Store the first run of a new trial (``run`` as ``add_run`` takes it, less its ``trial``),
        numbered after the newest trial in the same transaction, the experiment's row locked, so that
        trials started at once never share a number. Returns ``(the run's key, the trial)``."""
        with self.transaction() as conn:
            self._lock(conn, "pk = ?", (experiment_pk,))
            trial = conn.execute("SELECT COALESCE(MAX(trial), 0) + 1 FROM experiment_runs WHERE experiment_pk = ?",
                                 (experiment_pk,)).fetchone()[0]
            return self._insert_run(conn, experiment_pk, run | {"trial": trial}), trial

    @staticmethod
    def _insert_run(conn, experiment_pk, run):
        values = [dumps(run[c]) if c in _RUN_JSON and run[c] is not None else run[c] for c in RUN_COLUMNS]
        return conn.execute(
            f"INSERT INTO experiment_runs (experiment_pk, {', '.join(RUN_COLUMNS)})"
            f" VALUES ({', '.join('?' * (len(RUN_COLUMNS) + 1))}) RETURNING pk", (experiment_pk, *values),
        ).fetchone()[0]

    def runs(self, experiment_pk, *, trial=None, with_context=False) -> list[dict]:
        """Runs by trial, arm position and case position (``trial`` None: every trial). The context,
        which can be a whole branch, is read only ``with_context``."""
        columns = RUN_COLUMNS if with_context else _RUN_SUMMARY_COLUMNS
        where, params = "r.experiment_pk = :pk", {"pk": experiment_pk}
        if trial is not None:
            where, params["trial"] = where + " AND r.trial = :trial", trial
        rows = self._all(
            f"""SELECT r.pk, {', '.join('r.' + c for c in columns)} FROM experiment_runs r
            LEFT JOIN experiment_arms a ON a.experiment_pk = r.experiment_pk AND a.name = r.arm
            LEFT JOIN experiment_cases c ON c.experiment_pk = r.experiment_pk AND c.name = r.case_name
            WHERE {where} ORDER BY r.trial, COALESCE(a.position, 1000000), r.arm, COALESCE(c.position, 1000000),
                r.case_name""",
            params,
        )
        return readable(rows, _run_from_row)

    def run_context(self, run_pk) -> list | None:
        row = self._one("SELECT context FROM experiment_runs WHERE pk = ?", (run_pk,))
        return None if row is None else _loads(row, "experiment_runs", "context", f"experiment run {run_pk}")

    # -- labels and other judges' grades --------------------------------------------------------------

    def save_label(self, experiment_pk, label) -> None:
        """Store a person's label ``{"case_name", "arm", "probe_id", "output", "trial", "correct", "grade",
        "labelled_by", "labelled_at"}``, replacing the one given before on the same output."""
        self._store.write_one(
            f"INSERT INTO experiment_labels (experiment_pk, {', '.join(_LABEL_COLUMNS)})"
            f" VALUES (?, {', '.join('?' * len(_LABEL_COLUMNS))})"
            " ON CONFLICT (experiment_pk, case_name, arm, probe_id, output) DO UPDATE SET trial = excluded.trial,"
            " correct = excluded.correct, grade = excluded.grade, labelled_by = excluded.labelled_by,"
            " labelled_at = excluded.labelled_at",
            (experiment_pk, *(int(label[c]) if c == "correct" else label[c] for c in _LABEL_COLUMNS)),
        )

    def labels(self, experiment_pk) -> list[dict]:
        """Every label of the experiment, on every output, newest first (``correct`` a bool)."""
        rows = self._all(f"SELECT {', '.join(_LABEL_COLUMNS)} FROM experiment_labels WHERE experiment_pk = ?"
                         " ORDER BY labelled_at DESC", (experiment_pk,))
        return [dict(row) | {"correct": bool(row["correct"])} for row in rows]

    def save_grades(self, experiment_pk, grades) -> None:
        """Store another judge's verdicts ``[{"trial", "arm", "case_name", "probe_id", "judge_model", "score",
        "judge_output", "graded_at"}]`` in one transaction, replacing that judge's earlier ones."""
        with self.transaction() as conn:
            for grade in grades:
                conn.execute(
                    f"INSERT INTO experiment_grades (experiment_pk, {', '.join(_GRADE_COLUMNS)})"
                    f" VALUES (?, {', '.join('?' * len(_GRADE_COLUMNS))})"
                    " ON CONFLICT (experiment_pk, trial, arm, case_name, probe_id, judge_model) DO UPDATE SET"
                    " score = excluded.score, judge_output = excluded.judge_output, graded_at = excluded.graded_at",
                    (experiment_pk, *(grade[c] for c in _GRADE_COLUMNS)))

    def grades(self, experiment_pk, trial) -> list[dict]:
        """The other judges' verdicts on ``trial``, judge by judge."""
        rows = self._all(f"SELECT {', '.join(_GRADE_COLUMNS)} FROM experiment_grades"
                         " WHERE experiment_pk = ? AND trial = ? ORDER BY judge_model, arm, case_name, probe_id",
                         (experiment_pk, trial))
        return [dict(row) for row in rows]
