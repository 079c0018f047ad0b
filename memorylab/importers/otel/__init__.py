"""OpenTelemetry traces of LLM calls: OTLP JSON files, and what ``memorylab collect`` receives live.

A file is JSON lines of ``ExportTraceServiceRequest`` objects, as the OpenTelemetry Collector's file
exporter writes them (``{"resourceSpans": [...]}`` a line), or one such object. Its spans are read
whole and placed as ``sessions`` describes: one session per conversation, its tree rebuilt from the
context each LLM call sent (``tree``), in both conventions an instrumentor may write
(``conventions``). Message ids are digests of content and position, so a grown file, or the same
spans collected live, adds only what is new.
"""
from __future__ import annotations

from pathlib import Path

from ...errors import OtlpRequestError
from ..formats import SourceFormat, SourceProbe
from ..source import json_lines, loads, source_error
from .otlp import spans_from_json
from .sessions import OtelSessions

AGENT_ID = "otel"


def _is_request(value) -> bool:
    return isinstance(value, dict) and isinstance(value.get("resourceSpans"), list)


def _detect(probe: SourceProbe) -> bool:
    if probe.whole_json is not None:
        return _is_request(probe.whole_json)
    if probe.json_lines:
        return all(_is_request(value) for value in probe.json_lines)
    return (probe.text or "").lstrip().startswith('{"resourceSpans":')


def _read(path: Path):
    spans = []
    for number, value in _requests(path):
        try:
            spans.extend(spans_from_json(value))
        except OtlpRequestError as error:
            raise source_error(path, f"line {number}", str(error)) from None
    yield from OtelSessions().batch(spans)


def _requests(path):
    """(line number, JSON value) of each request: one a line, or the whole file as one (pretty-printed)."""
    with open(path, "rb") as file:
        first = next((line for line in file if line.strip()), b"")
    try:
        loads(first.decode("utf-8"))
    except ValueError:
        try:
            yield 1, loads(Path(path).read_text(encoding="utf-8"))
        except ValueError as error:  # UnicodeDecodeError is one
            raise source_error(path, "", f"not valid JSON ({error})") from None
        return
    yield from json_lines(path)


FORMAT = SourceFormat(
    name="otel", label="OpenTelemetry traces of LLM calls (OTLP JSON lines, OpenInference or GenAI conventions)",
    agent_id=AGENT_ID, detect=_detect, read=_read,
)
