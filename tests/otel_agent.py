"""An agent instrumented with OpenTelemetry, for the tests of ``memorylab collect`` and OTLP imports.

The agent is the real ``openai`` client pointed at a fake OpenAI server run here, traced by the real
OpenTelemetry SDK: in the OpenInference convention by ``openinference-instrumentation-openai``, or in
the GenAI convention by spans this module makes with the SDK around each call, carrying the
``gen_ai.*`` attributes (no GenAI instrumentor is installed). Its conversation holds a tool call and
a tool span, an edit of an earlier prompt (a fork), and a compaction: a call whose context lost its
first turns and holds a summary in their place.
"""
import base64
import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memorylab import Session

MODEL = "gpt-4o-mini"
SESSION = "chat-42"
SYSTEM = "You are a terse assistant."
SUMMARY = "Summary so far: the user asked which files are here: /srv/data/a.txt among them; then counted to 3."
LISTING = "/srv/data/a.txt\n/srv/data/report-2025-03-01.csv"
TOOL_CALL = "call_ls_1"


def answer_to(messages):
    """What the fake model answers: a tool call for a question about files, else an echo."""
    last = messages[-1]
    if last["role"] == "user" and "files" in last["content"]:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": TOOL_CALL, "type": "function", "function": {"name": "ls", "arguments": '{"path": "."}'}}]}
    return {"role": "assistant", "content": f"re: {last['content']}"}


class _FakeOpenAI(BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        message = answer_to(request["messages"])
        body = json.dumps({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": request["model"],
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
            "usage": {"prompt_tokens": 10 * len(request["messages"]), "completion_tokens": 5, "total_tokens": 0},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        pass


@contextmanager
def fake_openai():
    """The base URL of a fake OpenAI chat completions server."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


def tracer_provider(processor=None):
    """A TracerProvider of the real SDK; its spans also kept in memory (``provider.memory``)."""
    provider = TracerProvider(resource=Resource.create({"service.name": "test-agent"}))
    provider.memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(provider.memory))
    if processor is not None:
        provider.add_span_processor(processor)
    return provider


@contextmanager
def openinference_agent(provider, base_url):
    """``ask(messages)`` through the openai client, traced by the OpenInference instrumentor."""
    import openai
    from openinference.instrumentation import using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor

    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0)
    tracer = provider.get_tracer("test-agent")

    def ask(messages):
        return client.chat.completions.create(model=MODEL, messages=messages).choices[0].message

    def run_tool(name, call_id, arguments, result):
        with tracer.start_as_current_span(name, attributes={
                "openinference.span.kind": "TOOL", "tool.name": name, "tool.id": call_id,
                "input.value": json.dumps(arguments), "output.value": result}):
            return result

    try:
        with using_session(SESSION), tracer.start_as_current_span("agent", attributes={
                "openinference.span.kind": "AGENT", "session.id": SESSION}):
            yield ask, run_tool
    finally:
        instrumentor.uninstrument()


@contextmanager
def gen_ai_agent(provider, base_url):
    """``ask(messages)`` through the openai client, each call in a GenAI ``chat`` span made with the SDK."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0)
    tracer = provider.get_tracer("test-agent")

    def ask(messages):
        with tracer.start_as_current_span(f"chat {MODEL}") as span:
            response = client.chat.completions.create(model=MODEL, messages=messages)
            message = response.choices[0].message
            span.set_attributes({
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": MODEL,
                "gen_ai.response.model": response.model, "gen_ai.conversation.id": SESSION,
                "gen_ai.usage.input_tokens": response.usage.prompt_tokens,
                "gen_ai.usage.output_tokens": response.usage.completion_tokens,
                "gen_ai.system_instructions": json.dumps(
                    [{"type": "text", "content": m["content"]} for m in messages if m["role"] == "system"]),
                "gen_ai.input.messages": json.dumps([_gen_ai(m) for m in messages if m["role"] != "system"]),
                "gen_ai.output.messages": json.dumps([{**_gen_ai(message.model_dump()),
                                                       "finish_reason": response.choices[0].finish_reason}]),
            })
            return message

    def run_tool(name, call_id, arguments, result):
        with tracer.start_as_current_span(f"execute_tool {name}", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.call.arguments": json.dumps(arguments), "gen_ai.tool.call.result": result}):
            return result

    with tracer.start_as_current_span("invoke_agent", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": SESSION}):
        yield ask, run_tool


def _gen_ai(message):
    """A chat message as ``gen_ai.*.messages`` hold it: role and parts."""
    if message["role"] == "tool":
        return {"role": "tool", "parts": [{"type": "tool_call_response", "id": message["tool_call_id"],
                                           "response": message["content"]}]}
    parts = [{"type": "text", "content": message["content"]}] if message.get("content") else []
    parts += [{"type": "tool_call", "id": call["id"], "name": call["function"]["name"],
               "arguments": json.loads(call["function"]["arguments"])} for call in message.get("tool_calls") or ()]
    return {"role": message["role"], "parts": parts}


def converse(ask, run_tool):
    """The scripted conversation: a tool call, an edited prompt (a fork), then a compaction."""
    def said(message):
        return message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"})

    history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "which files are here?"}]
    reply = ask(history)
    call = reply.tool_calls[0]
    result = run_tool("ls", call.id, json.loads(call.function.arguments), LISTING)
    history += [said(reply), {"role": "tool", "tool_call_id": call.id, "content": result}]
    history.append(said(ask(history)))
    for number in ("1", "2"):
        history.append({"role": "user", "content": f"count {number}"})
        history.append(said(ask(history)))
    edited = history[:-2] + [{"role": "user", "content": "count 2, in French"}]
    ask(edited)
    history.append({"role": "user", "content": "count 3"})
    history.append(said(ask(history)))
    compacted = [history[0], {"role": "user", "content": SUMMARY}, {"role": "user", "content": "count 4"}]
    compacted.append(said(ask(compacted)))
    compacted.append({"role": "user", "content": "count 5"})
    ask(compacted)


def run_conversation(agent, provider):
    """Run ``converse`` with ``agent`` (``openinference_agent`` or ``gen_ai_agent``); the spans made."""
    with fake_openai() as base_url, agent(provider, base_url) as (ask, run_tool):
        converse(ask, run_tool)
    provider.force_flush()
    return provider.memory.get_finished_spans()


def otlp_json_line(spans) -> str:
    """One line of OTLP JSON as the Collector's file exporter writes it: hex ids, integer enums."""
    request = MessageToDict(encode_spans(spans), use_integers_for_enums=True)
    return json.dumps(_hex_ids(request)) + "\n"


def written(path, *batches):
    """``path`` holding one OTLP JSON line per batch of spans, as the Collector's file exporter writes them."""
    path.write_text("".join(otlp_json_line(spans) for spans in batches), encoding="utf-8")
    return path


def tree(store, session_id=SESSION, agent_id="otel"):
    """The session as its content and shape: (id, parent, role, parts) of each message, and its overlays
    (the same conversation, however it was sent, must give the same tree)."""
    session = Session.open(store, session_id, agent_id=agent_id)
    messages = sorted((m["id"], m["parent_id"], m["role"], json.dumps(m["parts"], sort_keys=True))
                      for m in session.storage.all())
    overlays = sorted((o["from_id"], o["to_id"], o["summary"]) for o in session.get_compactions())
    return messages, overlays


def _hex_ids(value):
    if isinstance(value, list):
        return [_hex_ids(item) for item in value]
    if isinstance(value, dict):
        return {key: base64.b64decode(item).hex() if key in ("traceId", "spanId", "parentSpanId") else _hex_ids(item)
                for key, item in value.items()}
    return value


def synthetic_calls(tracer, conversation, calls, words=12):
    """``calls`` GenAI chat spans of one conversation, made with the SDK without a model: each sends
    the whole context so far and answers with a message of its own (for counting and throughput)."""
    history = [{"role": "user", "parts": [{"type": "text", "content": f"{conversation} asks question 0"}]}]
    for number in range(calls):
        answer = {"role": "assistant", "parts": [{"type": "text", "content": " ".join(
            f"{conversation}-{number}-{word}" for word in range(words))}], "finish_reason": "stop"}
        with tracer.start_as_current_span(f"chat {MODEL}", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.request.model": MODEL,
                "gen_ai.conversation.id": conversation, "gen_ai.usage.input_tokens": 10 * len(history),
                "gen_ai.usage.output_tokens": words, "gen_ai.input.messages": json.dumps(history),
                "gen_ai.output.messages": json.dumps([answer])}):
            pass
        history += [answer, {"role": "user", "parts": [{"type": "text", "content": f"question {number + 1}"}]}]
