#!/usr/bin/env python
"""The fact matcher's precision and recall on question-answer data nobody on the team wrote.

    python benchmarks/matcher_quality.py --locomo locomo10.json --realtalk Chat_*.json --json out.json

The labels are the datasets' annotators', not ours. Each question's annotators wrote a gold answer
and named the turn(s) of the conversation it comes from (``evidence``). A question they answered
from exactly one turn gives a **positive**: its answer against that turn's text, when every word of
the answer is written in the turn (in any order: an answer the annotators paraphrased, or derived
from a date or an image, cannot be found by any matcher of written facts, and is counted apart as
``annotated_only``). Its **negatives** are the same answer against the turns around the evidence
(the same moment of the conversation, the hardest case) and against two turns of other
conversations, except a turn that repeats the answer word for word (the annotators name one turn,
not every turn that says it again). Adversarial questions (LoCoMo's category 5, with no answer in
the conversation) and yes/no answers are left out.

Precision is the share of the matcher's "found" verdicts that are positives; recall the share of
positives found. Each answer is matched against one turn's text, as one message of a context.
The JSON holds counts only: no text of the datasets (which are not ours to republish).
"""
from __future__ import annotations

import argparse
import json
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memorylab.experiments.facts import ContextText, match_fact  # noqa: E402  (the checkout's memorylab)

NEIGHBOURS = 2
"""Turns on each side of the evidence taken as negatives."""
OTHER_CONVERSATIONS = 2
"""Turns of other conversations taken as negatives for each answer."""
_WORD = re.compile(r"[^\W_]+")


@dataclass
class Question:
    answer: str
    category: int
    evidence: list


@dataclass
class Conversation:
    name: str
    turns: list
    """(turn id, text) in the conversation's order."""
    questions: list


def _words(text):
    return _WORD.findall(text.lower())


def read_locomo(path) -> list[Conversation]:
    """LoCoMo's locomo10.json: each sample's sessions of turns and its QA; category 5 is adversarial."""
    conversations = []
    for sample in json.loads(Path(path).read_text(encoding="utf-8")):
        sessions = sample["conversation"]
        turns = [(turn["dia_id"], turn["text"]) for key in _session_keys(sessions) for turn in sessions[key]]
        questions = [Question(str(qa["answer"]), qa["category"], qa.get("evidence") or [])
                     for qa in sample["qa"] if qa["category"] != 5 and "answer" in qa]
        conversations.append(Conversation(f"locomo:{sample['sample_id']}", turns, questions))
    return conversations


def read_realtalk(paths) -> list[Conversation]:
    """REALTALK's data/Chat_*.json: a real chat of 21 days, its sessions of messages and its QA."""
    conversations = []
    for path in paths:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        turns = [(turn["dia_id"], turn["clean_text"]) for key in _session_keys(data) for turn in data[key]]
        questions = [Question(str(qa["answer"]), qa["category"], qa.get("evidence") or []) for qa in data["qa"]]
        conversations.append(Conversation(f"realtalk:{Path(path).stem}", turns, questions))
    return conversations


def _session_keys(sessions):
    keys = [key for key, value in sessions.items() if re.fullmatch(r"session_\d+", key) and isinstance(value, list)]
    return sorted(keys, key=lambda key: int(key.split("_")[1]))


def _verbatim(answer, text):
    """Whether ``text`` writes ``answer`` word for word, as a run of whole words."""
    return f" {' '.join(_words(answer))} " in f" {' '.join(_words(text))} "


def labelled_pairs(conversations, seed=36):
    """(source, answer, turn text, label) for every judgeable question, and how many questions were
    left out and why."""
    rng, pairs, left_out = random.Random(seed), [], {}
    for conversation in conversations:
        position = {turn_id: index for index, (turn_id, _) in enumerate(conversation.turns)}
        others = [turn for other in conversations if other is not conversation for turn in other.turns]
        for question in conversation.questions:
            reason = _left_out(question, position)
            if reason:
                left_out[reason] = left_out.get(reason, 0) + 1
                continue
            at = position[question.evidence[0]]
            evidence = conversation.turns[at][1]
            if not set(_words(question.answer)) <= set(_words(evidence)):
                pairs.append((conversation.name, question.answer, evidence, "annotated_only"))
                continue
            pairs.append((conversation.name, question.answer, evidence, True))
            near = [conversation.turns[i][1] for i in range(at - NEIGHBOURS, at + NEIGHBOURS + 1)
                    if i != at and 0 <= i < len(conversation.turns)]
            for text in near + [text for _, text in rng.sample(others, OTHER_CONVERSATIONS)]:
                if not _verbatim(question.answer, text):
                    pairs.append((conversation.name, question.answer, text, False))
    return pairs, left_out


def _left_out(question, position):
    words = _words(question.answer)
    if not words:
        return "no answer"
    if words[0] in ("yes", "no"):
        return "a yes/no answer"
    if len(question.evidence) != 1:
        return "answered from several turns or none"
    if question.evidence[0] not in position:
        return "evidence names no turn of the conversation"
    return None


def measure(pairs):
    """Precision and recall per source (``locomo``, ``realtalk``) and over all."""
    results = {}
    for source, answer, text, label in pairs:
        found = match_fact(ContextText([text]), answer).kept
        for name in (source.split(":")[0], "all"):
            counts = results.setdefault(name, {"positives": 0, "negatives": 0, "found": 0, "false_matches": 0,
                                               "annotated_only": 0, "annotated_only_found": 0})
            if label == "annotated_only":
                counts["annotated_only"] += 1
                counts["annotated_only_found"] += found
            elif label:
                counts["positives"] += 1
                counts["found"] += found
            else:
                counts["negatives"] += 1
                counts["false_matches"] += found
    results = {name: results[name] for name in sorted(results, key=lambda name: name == "all")}
    for counts in results.values():
        claimed = counts["found"] + counts["false_matches"]
        counts["precision"] = round(counts["found"] / claimed, 4) if claimed else None
        counts["recall"] = round(counts["found"] / counts["positives"], 4) if counts["positives"] else None
    return results


def errors(pairs, limit):
    """The misses and false matches, to read by eye (printed only, never written to the JSON)."""
    lines = []
    for source, answer, text, label in pairs:
        if label == "annotated_only":
            continue
        found = match_fact(ContextText([text]), answer).kept
        if found != label:
            lines.append(f"{'MISSED' if label else 'FALSE '} {source}: {answer!r} in {text[:160]!r}")
    return lines[:limit]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, help="LoCoMo's data/locomo10.json")
    parser.add_argument("--realtalk", type=Path, nargs="*", default=[], help="REALTALK's data/Chat_*.json files")
    parser.add_argument("--json", type=Path, help="write the counts here")
    parser.add_argument("--show-errors", type=int, default=0, metavar="N", help="print the first N errors")
    args = parser.parse_args()
    conversations = (read_locomo(args.locomo) if args.locomo else []) + read_realtalk(args.realtalk)
    if not conversations:
        parser.error("give --locomo and/or --realtalk files")
    pairs, left_out = labelled_pairs(conversations)
    results = measure(pairs)
    print(f"{'source':>10} {'positives':>10} {'negatives':>10} {'precision':>10} {'recall':>8} "
          f"{'annotated only (found)':>24}")
    for name, c in results.items():
        print(f"{name:>10} {c['positives']:>10} {c['negatives']:>10} {c['precision']:>10} {c['recall']:>8} "
              f"{c['annotated_only']:>16} ({c['annotated_only_found']})")
    print("left out: " + ", ".join(f"{count} {reason}" for reason, count in sorted(left_out.items())))
    for line in errors(pairs, args.show_errors):
        print(line)
    if args.json:
        args.json.write_text(json.dumps({"sources": results, "left_out": left_out}, indent=2) + "\n",
                             encoding="utf-8")


if __name__ == "__main__":
    main()
