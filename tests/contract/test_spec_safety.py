"""What an experiment spec may make memorylab do, on both backends: its model calls go only to hosts the
user allowed (never by default: a spec in a pull request must not send CI's key elsewhere), its
templates are checked whole before anything runs, its cases read the caller's tenant only, and
``memorylab eval`` exits 2 on anything but a score."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from memorylab import InvalidInputError, Session
from memorylab.cli import main
from memorylab.errors import ApiHostNotAllowedError
from memorylab.experiments import Experiments, parse_spec
from memorylab.experiments.runner import resolve_cases, run_one
from memorylab.experiments.spec import Arm, Case, ExperimentSpec, Probe
from memorylab.experiments.strategies import apply_arm
from memorylab.history.compaction import check_summary_template
from memorylab.llm.api_hosts import ALLOWED_HOSTS_VARIABLE
from memorylab.llm.models import make_summarizer
from tests.helpers import text_message

FAKE_KEY = "sk-test-spec-safety-0123456789"
SUMMARY = "## Topic\nPostgreSQL migration.\n## Key Points\nPriya Raman is the DBA.\n## Current State\nDone.\n" \
          "## Open Items\nNone."


class FakeProvider(BaseHTTPRequestHandler):
    """An OpenAI-compatible server that answers every chat request with SUMMARY and keeps what it was sent."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.received.append({"path": self.path, "authorization": self.headers.get("Authorization")})
        body = json.dumps({
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": SUMMARY}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def provider(monkeypatch):
    """A host the environment's provider key must not reach unless allowed: ``provider.host`` is its
    ``127.0.0.1:PORT``, ``provider.received`` the requests it got."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.delenv(ALLOWED_HOSTS_VARIABLE, raising=False)
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeProvider)
    server.received = []
    server.host = f"127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def one_session(store):
    session = Session.create(store, "migration")
    for i in range(12):
        session.append_message(text_message(f"m{i}", f"Message {i}: Priya Raman is our DBA. " * 20,
                                            "user" if i % 2 == 0 else "assistant"))
    return store


def summarize_arm(completion, **settings):
    return {"name": "remote", "strategy": "summarize", "model": "openai/gpt-4o-mini", "protect_head": 1,
            "tail_token_budget": 200, "completion": completion, **settings}


def spec_with(arm, **changes):
    return {"name": "safety", "arms": [arm],
            "cases": [{"name": "migration", "session": "migration",
                       "probes": [{"id": "dba", "question": "Who is the DBA?", "facts": ["Priya Raman"]}]}]} | changes


# -- hosts -------------------------------------------------------------------------------------------------

def test_a_spec_api_base_is_refused_before_anything_runs_unless_its_host_is_allowed(one_session, provider,
                                                                                    monkeypatch):
    spec = spec_with(summarize_arm({"api_base": f"http://{provider.host}/v1"}))
    with pytest.raises(ApiHostNotAllowedError) as refused:
        Experiments(one_session).run(spec)
    message = str(refused.value)
    assert provider.host in message and "--allow-host" in message and ALLOWED_HOSTS_VARIABLE in message
    assert provider.received == [] and Experiments(one_session).listing() == []  # nothing sent, nothing saved

    results = Experiments(one_session, allowed_hosts=[provider.host]).run(spec)
    assert results.runs[0]["error"] is None and results.runs[0]["summary"] == SUMMARY
    assert provider.received and provider.received[0]["authorization"] == f"Bearer {FAKE_KEY}"

    monkeypatch.setenv(ALLOWED_HOSTS_VARIABLE, "models.example.org, 127.0.0.1")  # a host allows every port
    assert Experiments(one_session).run(spec).runs[0]["error"] is None


def test_every_arm_that_calls_a_model_is_refused_before_anything_runs(one_session, provider):
    arm = summarize_arm({"api_base": f"http://{provider.host}/v1"}, strategy="mask+summarize", token_budget=1)
    with pytest.raises(ApiHostNotAllowedError, match="arm 'remote'"):
        Experiments(one_session).run(spec_with(arm))
    assert provider.received == [] and Experiments(one_session).listing() == []


def test_the_grader_completion_is_held_to_the_same_hosts(one_session, provider):
    spec = spec_with({"name": "all", "strategy": "none"},
                     grader={"answer_model": "openai/gpt-4o-mini", "judge_model": "openai/gpt-4o-mini",
                             "completion": {"api_base": f"http://{provider.host}/v1"}})
    with pytest.raises(ApiHostNotAllowedError, match="grader"):
        Experiments(one_session).run(spec)
    assert provider.received == []


def test_a_run_that_skipped_the_spec_check_still_sends_nothing_to_a_host_not_allowed(one_session, provider):
    arm = Arm("remote", "summarize", settings=parse_spec(spec_with(summarize_arm({}))).arms[0].settings
              | {"completion": {"api_base": f"http://{provider.host}/v1"}})
    spec = ExperimentSpec(name="built", arms=(arm,), cases=(
        Case("migration", "migration", tenant="default",
             probes=(Probe("dba", "recall", "Who?", facts=("Priya Raman",)),)),))
    branch = resolve_cases(one_session, spec)["migration"]
    with pytest.raises(ApiHostNotAllowedError):
        apply_arm(arm, branch.history)
    run = run_one(arm, branch)
    assert run["error"].startswith("ApiHostNotAllowedError") and provider.host in run["error"]
    assert provider.received == []
    assert run_one(arm, branch, allowed_hosts=[provider.host])["error"] is None


@pytest.mark.parametrize("completion, fragment", [
    ({"base_url": "http://collector.example.net/v1"}, "'base_url'"),
    ({"custom_llm_provider": "openai"}, "'custom_llm_provider'"),
    ({"api_version": "2024-01-01"}, "'api_version'"),
    ({"extra_headers": {"X-Forward-To": "collector.example.net"}}, "'extra_headers'"),
    ({"litellm_params": {"api_base": "http://collector.example.net"}}, "'litellm_params'"),
])
def test_completion_options_that_could_redirect_a_call_are_refused_by_the_spec_check(completion, fragment):
    with pytest.raises(InvalidInputError, match="cannot run") as refused:
        parse_spec(spec_with(summarize_arm(completion)))
    assert f"completion may not hold {fragment}" in str(refused.value)
    assert "temperature, top_p" in str(refused.value)  # what it may hold is listed
    with pytest.raises(InvalidInputError, match=f"grader: completion may not hold {fragment}"):
        parse_spec(spec_with({"name": "all", "strategy": "none"},
                             grader={"answer_model": "m", "judge_model": "m", "completion": completion}))


@pytest.mark.parametrize("api_base", ["collector.example.net", "ftp://collector.example.net", "http://", 7])
def test_an_api_base_that_is_not_an_http_url_is_refused(api_base):
    with pytest.raises(InvalidInputError, match="api_base must be an http:// or https:// URL with a host"):
        parse_spec(spec_with(summarize_arm({"api_base": api_base})))


def test_a_model_string_holding_a_url_is_refused():
    with pytest.raises(InvalidInputError, match="model .* names a host"):
        parse_spec(spec_with(summarize_arm({}, model="openai/http://collector.example.net/v1")))
    with pytest.raises(InvalidInputError, match="judge_model .* names a host"):
        parse_spec(spec_with({"name": "all", "strategy": "none"},
                             grader={"answer_model": "m", "judge_model": "https://collector.example.net"}))


def test_the_embedded_model_and_generation_options_need_no_host(one_session):
    spec = spec_with(summarize_arm({"temperature": 0, "max_tokens": 200, "mock_response": SUMMARY}, model=None))
    assert Experiments(one_session).run(spec).runs[0]["error"] is None


def test_eval_allows_a_host_only_when_told(store_target, one_session, provider, tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_with(summarize_arm({"api_base": f"http://{provider.host}/v1"}))))
    assert main(["--db", str(store_target), "eval", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"api_base host {provider.host!r} is not allowed" in err and "Traceback" not in err
    assert provider.received == []
    assert main(["--db", str(store_target), "eval", str(path), "--allow-host", "models.example.org",
                 "--allow-host", provider.host]) == 0
    assert provider.received


# -- templates -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("template", ["{transcript!r}", "{transcript:>1500000000}", "{target_tokens:s} {transcript}",
                                      "{transcript} {previous_summary!s:{target_tokens}}"])
def test_a_conversion_or_format_spec_in_a_summary_template_is_refused_at_the_spec_check(template):
    with pytest.raises(InvalidInputError, match="plain placeholders") as refused:
        parse_spec(spec_with(summarize_arm({}, template=template)))
    assert "cannot run" in str(refused.value)
    with pytest.raises(InvalidInputError, match="plain placeholders"):
        check_summary_template(template)  # a session's compaction template is held to the same rule


@pytest.mark.parametrize("template", ["{transcript.upper}", "{transcript[0]}", "{0} {transcript}", "{} {transcript}"])
def test_attribute_index_and_positional_fields_are_refused(template):
    with pytest.raises(InvalidInputError, match="unknown placeholder"):
        check_summary_template(template)


@pytest.mark.parametrize("template", ["{prompt!r}", "{prompt:>1500000000}", "{prompt.upper}"])
def test_a_summarizer_template_is_held_to_the_same_rule(template):
    with pytest.raises(InvalidInputError, match="summarizer template"):
        make_summarizer(template=template)


def test_eval_exits_2_on_a_bad_template_with_no_traceback(store_target, tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_with(summarize_arm({}, template="{transcript:>1500000000}"))))
    assert main(["--db", str(store_target), "eval", str(path)]) == 2
    err = capsys.readouterr().err
    assert "plain placeholders" in err and "Traceback" not in err


@pytest.mark.parametrize("options, fragment", [(["--tenant", ""], "tenant id"),
                                               (["--min-score", "5"], "--min-score must be from 0 to 1")])
def test_eval_exits_2_on_every_setup_error(store_target, tmp_path, capsys, options, fragment):
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec_with({"name": "all", "strategy": "none"})))
    assert main(["--db", str(store_target), "eval", str(path), *options]) == 2
    err = capsys.readouterr().err
    assert fragment in err and len(err.strip().splitlines()) == 1


# -- tenants -------------------------------------------------------------------------------------------------

@pytest.fixture
def two_tenants(store):
    for tenant, fact in (("default", "the default tenant's secret"), ("acme", "Priya Raman")):
        Session.create(store, "migration", tenant_id=tenant).append_message(text_message("m0", f"Remember {fact}."))
    return store


def test_a_case_without_a_tenant_reads_the_experiment_tenant(two_tenants):
    results = Experiments(two_tenants, tenant_id="acme").run(spec_with({"name": "all", "strategy": "none"}))
    assert results.runs[0]["tenant_id"] == "acme" and results.runs[0]["score"] == 1.0
    assert Experiments(two_tenants, tenant_id="acme").get("safety").cases[0].tenant == "acme"


def test_a_case_naming_another_tenant_is_refused_unless_the_caller_allows_it(two_tenants):
    spec = spec_with({"name": "all", "strategy": "none"})
    spec["cases"][0]["tenant"] = "default"
    acme = Experiments(two_tenants, tenant_id="acme")
    with pytest.raises(InvalidInputError, match="case 'migration' reads tenant 'default'") as refused:
        acme.run(spec)
    assert "case_tenants" in str(refused.value) and acme.listing() == []
    with pytest.raises(InvalidInputError, match="tenant 'default'"):
        acme.save(spec)
    allowed = Experiments(two_tenants, tenant_id="acme", case_tenants=["default"]).run(spec)
    assert allowed.runs[0]["tenant_id"] == "default"


def test_eval_keeps_cases_in_its_tenant_unless_told(store_target, two_tenants, tmp_path, capsys):
    spec = spec_with({"name": "all", "strategy": "none"})
    spec["cases"][0]["tenant"] = "default"
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["--db", str(store_target), "eval", str(path), "--tenant", "acme"]) == 2
    assert "reads tenant 'default'" in capsys.readouterr().err
    assert main(["--db", str(store_target), "eval", str(path), "--tenant", "acme", "--case-tenant", "default"]) == 0
