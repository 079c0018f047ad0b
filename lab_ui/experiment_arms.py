"""The Experiments page's Arms tab: the spec's top-level settings and its arms as a table, each
model arm's prompt template and completion arguments, and "Duplicate" (see ``experiment_drafts``
for the draft they edit)."""
import copy
import json

import pandas as pd
import streamlit as st

from memorylab.experiments import STRATEGY_DEFAULTS, STRATEGY_HELP, Arm
from memorylab.experiments.strategies import MODEL_STRATEGIES
from memorylab.history.compaction import DEFAULT_SUMMARY_TEMPLATE

from .escaping import escape_markdown
from .experiment_drafts import plain, section_key

SETTING_HELP = {
    "protect_head": "summarize, mask+summarize, extractive: messages kept verbatim at the start (default 3)",
    "tail_token_budget": "summarize, mask+summarize, extractive: tokens of recent messages kept verbatim "
                         "(blank: a quarter of the branch)",
    "min_tail_messages": "summarize, mask+summarize, extractive: recent messages kept whatever their size (default 2)",
    "model": "summarize, mask+summarize: any litellm model string (blank: the embedded model)",
    "max_length": "window: characters the window holds (default 12000)",
    "handler": "window: the resize handler (default simple_cut)",
    "keep_recent": "truncate, mask, mask+summarize: newest messages left whole (default 4)",
    "max_tool_output_chars": "truncate: longest older tool output kept (default 500)",
    "max_text_chars": "truncate: longest older text kept (default 10000)",
}
TEXT_SETTINGS = ("model", "handler")
ARM_COLUMNS = ("name", "strategy", *SETTING_HELP, "min_score")
HIDDEN_ARM_COLUMNS = ("template", "completion")
"""Kept in the table, so they follow their row, and edited under it: too long for a cell."""


def edit_arms(draft):
    """The arms section: the spec's top-level settings, the arms table, each model arm's template,
    and "Duplicate". Returns ``(spec, problems, changes)``: the spec with the arms as edited, what
    the page itself could not read (a completion that is not JSON), and the changes to apply."""
    key = section_key(draft, "arms", lambda k: f"exp_arms:{k}")
    top = _edit_settings(draft["base"]["arms"], key)
    arms, problems, changes = _edit_arm_table(draft["base"]["arms"]["arms"], key)
    return top | {"arms": arms, "cases": draft["spec"]["cases"]}, problems, changes


def _edit_settings(spec, version) -> dict:
    """Name, description, concurrency and the threshold of every arm: the spec's top-level keys."""
    name, concurrency, min_score = st.columns([3, 1, 1])
    top = {
        "name": name.text_input("Name", spec.get("name", ""), key=f"exp_name:{version}",
                                help="Saving under another name keeps both experiments."),
        "description": st.text_area("Description", spec.get("description", ""), height=68,
                                    key=f"exp_description:{version}"),
        "concurrency": concurrency.number_input("Concurrency", 1, 64, spec.get("concurrency", 4),
                                                key=f"exp_concurrency:{version}", help="Model calls at once"),
    }
    threshold = min_score.number_input("Min score, every arm", 0.0, 1.0, spec.get("min_score"), step=0.05,
                                       key=f"exp_min_score:{version}",
                                       help="The mean probe score an arm must reach unless it sets its own")
    if threshold is not None:
        top["min_score"] = threshold
    if spec.get("grader"):
        top["grader"] = spec["grader"]
    return top


def arms_table(arms) -> pd.DataFrame:
    """The arms (flat YAML form) as the editor's rows."""
    rows = [{column: arm.get(column) for column in ARM_COLUMNS}
            | {"template": arm.get("template"),
               "completion": json.dumps(arm["completion"]) if arm.get("completion") else None}
            for arm in arms]
    frame = pd.DataFrame(rows, columns=[*ARM_COLUMNS, *HIDDEN_ARM_COLUMNS])
    numeric = [c for c in ARM_COLUMNS if c not in ("name", "strategy", *TEXT_SETTINGS)]
    frame[numeric] = frame[numeric].apply(pd.to_numeric)
    return frame


def arm_from_row(row) -> dict:
    """One editor row as a flat arm: the settings its strategy reads, blanks left to their defaults
    (the template and completion arguments are read from their own editor)."""
    row = {key: plain(value) for key, value in row.items()}
    arm = {"name": row["name"], "strategy": row["strategy"]}
    arm.update((key, row[key]) for key in STRATEGY_DEFAULTS.get(row["strategy"], {})
               if key in ARM_COLUMNS and row[key] is not None)
    if row["min_score"] is not None:
        arm["min_score"] = row["min_score"]
    return arm


def compaction_arm(arm) -> Arm:
    """The engine's ``Arm`` of a flat summarize or extractive arm, for its compaction plan."""
    defaults = STRATEGY_DEFAULTS[arm["strategy"]]
    return Arm(name=arm["name"], strategy=arm["strategy"],
               settings=defaults | {key: value for key, value in arm.items() if key in defaults})


def duplicate_arm(spec, name):
    """``spec`` with a copy of arm ``name`` after it, named ``name-copy`` (or ``-copy-2``…)."""
    names = {arm["name"] for arm in spec["arms"]}
    copy_name = next(f"{name}-copy{suffix}" for suffix in ("", *(f"-{n}" for n in range(2, 1000)))
                     if f"{name}-copy{suffix}" not in names)
    arms = []
    for arm in spec["arms"]:
        arms.append(arm)
        if arm["name"] == name:
            arms.append(copy.deepcopy(arm) | {"name": copy_name})
    return spec | {"arms": arms}


def _edit_arm_table(arms, version):
    st.caption("One row per arm. Each strategy reads its own columns (hover a header); blank cells take the "
               "defaults and columns another strategy reads are ignored. Add a row at the bottom of the table, "
               "delete one by selecting it. "
               + " ".join(f"**{name}**: {text}." for name, text in STRATEGY_HELP.items()))
    config = {
        "name": st.column_config.TextColumn(required=True, help="Unique within the experiment"),
        "strategy": st.column_config.SelectboxColumn(options=list(STRATEGY_DEFAULTS), required=True,
                                                     default="extractive"),
        "min_score": st.column_config.NumberColumn(
            min_value=0.0, max_value=1.0, step=0.01, format="%.2f",
            help="The mean probe score this arm must reach (blank: the experiment's)"),
    }
    for key, text in SETTING_HELP.items():
        config[key] = (st.column_config.TextColumn(help=text) if key in TEXT_SETTINGS
                       else st.column_config.NumberColumn(min_value=0, step=1, help=text))
    edited = st.data_editor(arms_table(arms), key=f"exp_arms:{version}", num_rows="dynamic", hide_index=True,
                            column_order=ARM_COLUMNS, column_config=config, placeholder="default", width="stretch")
    arms, problems, changes = [], [], []
    for index, row in enumerate(edited.to_dict("records")):
        arm = arm_from_row(row)
        if arm["strategy"] in MODEL_STRATEGIES:
            problem = _template_editor(arm, row, f"{version}:{index}")
            if problem:
                problems.append(problem)
        arms.append(arm)
    named = [arm["name"] for arm in arms if arm["name"]]
    if named:
        left, right = st.columns([3, 1], vertical_alignment="bottom")
        chosen = left.selectbox("Arm to duplicate", named, key=f"exp_duplicate_arm:{version}")
        if right.button("Duplicate the arm", key=f"exp_duplicate:{version}", width="stretch"):
            changes.append(lambda spec: duplicate_arm(spec, chosen))
    return arms, problems, changes


def _template_editor(arm, row, key):
    """The prompt template and completion arguments of one model arm (summarize, mask+summarize), in an expander; fills
    them into ``arm``. Returns a problem, or None."""
    with st.expander(f"Prompt and completion of arm “{escape_markdown(arm['name'] or 'unnamed')}”", icon="📝"):
        template = st.text_area("Summary prompt template", plain(row["template"]) or DEFAULT_SUMMARY_TEMPLATE,
                                height=220, key=f"exp_template:{key}",
                                help="Placeholders: {transcript} (required), {previous_summary}, {target_tokens}.")
        completion = st.text_input("Completion arguments (JSON)", plain(row["completion"]) or "{}",
                                   key=f"exp_completion:{key}",
                                   help='Passed to litellm.completion, e.g. {"temperature": 0, "max_tokens": 300}. '
                                        "Keys come from the environment, never from here.")
    if template.strip() != DEFAULT_SUMMARY_TEMPLATE.strip():
        arm["template"] = template
    try:
        parsed = json.loads(completion or "{}")
    except ValueError as error:
        return f"arm {arm['name']!r}: the completion arguments are not JSON ({error})"
    if parsed:
        arm["completion"] = parsed
    return None
