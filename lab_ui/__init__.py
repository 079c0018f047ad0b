"""The lab's shared UI parts, one concern a module; the page scripts are in ``app_pages/``.

``sidebar`` (every page's start: the database, session and model pickers), ``store`` (the cached
store), ``selection`` (the session and leaf every page shows, and the branch they read), ``models``
(the sidebar's model and completion arguments), ``damaged_rows`` (the banner naming skipped rows),
``guarded_edits`` (forms that refuse to overwrite someone else's save), ``tables`` (selectable
tables), ``navigation`` (links between pages), ``job_progress`` (a background job's bar), and the
panels and editors that one or two pages draw.
"""
