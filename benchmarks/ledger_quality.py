"""How well the artifact ledger finds what a person labelled: precision and recall per kind.

    python benchmarks/ledger_quality.py [--heldout] [--markdown] [--json PATH] [--show KIND]

The labelled set is ``tests/data/ledger/labels.json`` (its README says where each span came from and
how it was labelled, by someone who never saw the extractor); the extractor was tuned on it.
``--heldout`` scores ``tests/data/ledger/heldout/labels.json`` instead: spans written and labelled
later by someone who saw neither the extractor nor the first set, never used to tune it. A found artifact is
right when a labelled one of its kind in the same span says the same thing: the same text once case, spacing
and punctuation are set aside, or one text holding the other (``summarize.py`` for
``importer/summarize.py``); a quantity also when it is the labelled one followed by what it is counted
per ("€289 per person" for "€289": the labels of the held-out set stop at the amount, those of the first
set go on); a decision also when most of its words are the labelled sentence's.
Precision is the share of found artifacts that are right; recall the share of labelled ones found.
A second mention of a labelled artifact in another spelling counts as right, not as noise: the
labels list each thing once.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memorylab import Store  # noqa: E402  (the checkout's memorylab, whatever is installed)
from memorylab.audit.artifacts import KINDS, extract_artifacts  # noqa: E402
from memorylab.history.session import Session  # noqa: E402
from memorylab.importers import import_source  # noqa: E402

LABELS = ROOT / "tests" / "data" / "ledger" / "labels.json"
HELDOUT = ROOT / "tests" / "data" / "ledger" / "heldout" / "labels.json"
TARGET_PRECISION = 0.9


def span_messages(span) -> list[dict]:
    """The messages of a labelled span, read from where the labels say it came from."""
    source = ROOT / span["source"]
    if source.suffix == ".jsonl":
        with Store(":memory:") as store:
            report = import_source(store, source)
            imported = report.sessions[0]
            return list(Session(store, imported.session_id, agent_id=imported.agent_id).get_all_messages())
    return json.loads(source.read_text(encoding="utf-8"))["messages"]


def _plain(text) -> str:
    text = re.sub(r":\d+$", "", text.strip().strip("`'\"*()[]<>.,;:"))
    text = text[2:] if text.startswith("./") else text
    return " ".join(text.lower().rstrip("/").split())


def _letters(text) -> str:
    return re.sub(r"[\W_]+", "", text.lower())


def _words(text) -> set:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def same(kind, found, labelled) -> bool:
    a, b = _plain(found), _plain(labelled)
    if a == b or _letters(a) == _letters(b):
        return True
    if kind == "quantity" and a.startswith((b + " ", b + "/")):
        return True  # the labelled amount and what it is counted per: "€289 per person" for "€289"
    shorter, longer = sorted((_letters(a), _letters(b)), key=len)
    if len(shorter) >= 4 and shorter in longer:
        return True
    if kind == "decision":
        x, y = _words(a), _words(b)
        return bool(x and y) and len(x & y) / min(len(x), len(y)) >= 0.6
    return False


def evaluate(labels_path=LABELS) -> dict:
    """``{"kinds": {kind: {"found", "right", "labelled", "recalled", "precision", "recall"}},
    "noise": {kind: [texts]}, "missed": {kind: [texts]}}`` over every labelled span."""
    labels = json.loads(Path(labels_path).read_text(encoding="utf-8"))
    counts = {kind: dict.fromkeys(("found", "right", "labelled", "recalled"), 0) for kind in KINDS}
    noise, missed = {kind: [] for kind in KINDS}, {kind: [] for kind in KINDS}
    for span in labels["spans"]:
        found = extract_artifacts(span_messages(span))
        gold = span["artifacts"]
        for artifact in found:
            counts[artifact.kind]["found"] += 1
            if any(g["kind"] == artifact.kind and same(artifact.kind, artifact.text, g["text"]) for g in gold):
                counts[artifact.kind]["right"] += 1
            else:
                noise[artifact.kind].append(f"{span['name']}: {artifact.text}")
        for g in gold:
            counts[g["kind"]]["labelled"] += 1
            if any(a.kind == g["kind"] and same(a.kind, a.text, g["text"]) for a in found):
                counts[g["kind"]]["recalled"] += 1
            else:
                missed[g["kind"]].append(f"{span['name']}: {g['text']}")
    for c in counts.values():
        c["precision"] = c["right"] / c["found"] if c["found"] else None
        c["recall"] = c["recalled"] / c["labelled"] if c["labelled"] else None
    return {"spans": len(labels["spans"]), "kinds": counts, "noise": noise, "missed": missed}


def _share(value) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def print_table(result, markdown, command="python benchmarks/ledger_quality.py") -> None:
    rows = [(kind, c["found"], c["right"], _share(c["precision"]), c["labelled"], c["recalled"], _share(c["recall"]))
            for kind, c in result["kinds"].items()]
    headers = ("kind", "found", "right", "precision", "labelled", "found of them", "recall")
    if markdown:
        print("| " + " | ".join(headers) + " |\n|" + "---|" * len(headers))
        for row in rows:
            print("| " + " | ".join(map(str, row)) + " |")
    else:
        print("  ".join(f"{h:>13}" for h in headers))
        for row in rows:
            print("  ".join(f"{str(cell):>13}" for cell in row))
    print(f"\n{result['spans']} labelled spans; source: {command}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heldout", action="store_true", help="score the held-out set, never used for tuning")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--json", metavar="PATH", help="also write the result as JSON")
    parser.add_argument("--show", metavar="KIND", choices=KINDS, help="list the noise and the misses of one kind")
    args = parser.parse_args()
    result = evaluate(HELDOUT if args.heldout else LABELS)
    print_table(result, args.markdown, " ".join(["python benchmarks/ledger_quality.py", *sys.argv[1:]]))
    if args.show:
        print(f"\nnoise ({args.show}):", *result["noise"][args.show], sep="\n  ")
        print(f"\nmissed ({args.show}):", *result["missed"][args.show], sep="\n  ")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
