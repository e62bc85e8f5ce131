"""Acquisition against the fault-injecting fake OpenAI-compatible server (127.0.0.1 only)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from replaylens.errors import ConfigError, JournalError
from replaylens.llm import (
    Acquirer,
    AcquireSettings,
    Backend,
    FakeOpenAIServer,
    ItemDecoder,
    MenuRow,
    ModelSettings,
    PromptItem,
    PromptTemplate,
    Request,
    ShownRecord,
    amend,
    make_backend,
    make_request,
    render_prompt,
    validate,
)
from replaylens.llm._store import RunStore, open_store
from replaylens.paper.joint import PAPER_ACTIONS, JointBlock, JointDesign, run_joint

KEY = "sk-test-4f9c2a7d1e8b6a5c3f0e9d8c7b6a5f4e"
ARMS = tuple(PAPER_ACTIONS)


@pytest.fixture
def fake() -> Iterator[Callable[..., FakeOpenAIServer]]:
    servers: list[FakeOpenAIServer] = []

    def start(**kw: object) -> FakeOpenAIServer:
        srv = FakeOpenAIServer(api_key=KEY, **kw).start()  # type: ignore[arg-type]
        servers.append(srv)
        return srv

    yield start
    for s in servers:
        s.stop()


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)


def _requests(be: Backend, n: int, repeats: int = 1) -> list[Request]:
    out = []
    for i in range(n):
        recs = (ShownRecord("coverage", 0.2 + 0.01 * i), ShownRecord("mixed", 0.6))
        item = PromptItem("domain", "ctx", "future", i, tuple(MenuRow(a) for a in ARMS), recs)
        text = render_prompt([item], PromptTemplate(budget=None))
        for r in range(repeats):
            out.append(make_request(text, [ItemDecoder(ARMS, {a: a for a in ARMS})],
                                    settings_digest=be.settings.digest(), repeat=r, meta={"i": i}))
    return out


def _run(tmp: Path, be: Backend, reqs: list[Request], **acq: float) -> tuple[RunStore, Acquirer]:
    settings = AcquireSettings(**{"concurrency": 4, "timeout_s": 2.0, "retries": 0, **acq})  # type: ignore[arg-type]
    st = open_store(tmp, {"seed": 7, "settings": be.settings.to_dict(), "acquisition": settings.to_dict()})
    reqs = st.add_requests(reqs)
    a = Acquirer(st, be, settings)
    a.run(reqs)
    return st, a


def _attempts(tmp: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in (tmp / "attempts.jsonl").read_text().splitlines() if x.strip()]


EXPECTED = {
    "ok": ["ok"],
    "429": ["capacity_error"], "503": ["capacity_error"],
    "500": ["transport_error"], "timeout": ["transport_error"], "garbage_body": ["transport_error"],
    "leak_key_error": ["transport_error"],
    "invalid_json": ["schema_invalid", "ok"], "off_menu": ["schema_invalid", "ok"], "empty": ["schema_invalid", "ok"],
    "refusal": ["schema_invalid", "ok"], "length": ["schema_invalid", "ok"], "leak_key": ["schema_invalid", "ok"],
    "wrong_model": ["protocol_violation"], "echo_mismatch": ["protocol_violation"],
    "tool_call": ["protocol_violation"],
}


def test_every_injected_fault_is_recorded_with_its_status(tmp_path: Path,
                                                          fake: Callable[..., FakeOpenAIServer]) -> None:
    names = list(EXPECTED)
    be0 = make_backend("openai/fake-model", base_url="http://127.0.0.1:9/v1")
    reqs = _requests(be0, len(names))
    fault_of = {r.prompt_sha256: names[r.meta["i"]] for r in reqs}
    srv = fake(policy=lambda sha, occ: fault_of[sha] if occ == 0 else "ok", timeout_sleep_s=1.0)
    be = make_backend("openai/fake-model", base_url=srv.url)
    st, _ = _run(tmp_path, be, _requests(be, len(names)), timeout_s=0.4)
    for r in _requests(be, len(names)):
        got = [a["status"] for a in st.attempts[r.request_id]]
        assert got == EXPECTED[names[r.meta["i"]]], names[r.meta["i"]]
        kinds = [a["kind"] for a in st.attempts[r.request_id]]
        assert kinds == ["original", "format_retry"][: len(kinds)]
    rep = st.validate()
    st.close()
    assert not rep.ok and len(rep.missing) == 9          # failures are never imputed
    assert rep.format_retries == 6
    atts = _attempts(tmp_path)
    fails = [a for a in atts if a["status"] != "ok"]
    assert all(a["usage"] is None for a in fails if a["status"] in ("capacity_error", "transport_error"))
    assert all(a["usage"] is not None for a in atts if a["status"] == "ok")


def test_exactly_one_format_retry_then_missing(tmp_path: Path, fake: Callable[..., FakeOpenAIServer]) -> None:
    srv = fake(policy=lambda sha, occ: "off_menu")
    be = make_backend("openai/fake-model", base_url=srv.url)
    st, _ = _run(tmp_path, be, _requests(be, 3))
    for rid in st.plan:
        assert [(a["kind"], a["status"]) for a in st.attempts[rid]] == [
            ("original", "schema_invalid"), ("format_retry", "schema_invalid")]
    n = srv.n_requests
    assert n == 6
    Acquirer(st, be, AcquireSettings(retries=0)).run([st.request(r) for r in st.plan])  # nothing left to ask
    assert srv.n_requests == n
    rep = st.validate()
    st.close()
    assert not rep.ok and len(rep.missing) == 3 and rep.n_selected == 0


def test_backoff_retries_run_under_the_frozen_amendment(tmp_path: Path, fake: Callable[..., FakeOpenAIServer]) -> None:
    srv = fake(policy=lambda sha, occ: ("429", "500")[occ] if occ < 2 else "ok")
    be = make_backend("openai/fake-model", base_url=srv.url)
    st, acq = _run(tmp_path, be, _requests(be, 2), retries=2, backoff_base_s=0.01, backoff_max_s=0.05)
    for rid in st.plan:
        assert [(a["kind"], a["status"], a["amendment_id"]) for a in st.attempts[rid]] == [
            ("original", "capacity_error", None), ("replacement", "transport_error", "0000"),
            ("replacement", "ok", "0000")]
    am = json.loads(next((tmp_path / "amendments").glob("0000-*.json")).read_text())
    assert am["declared_before_acquisition"] is True and am["constraints"]["max_replacements_per_request"] == 2
    rep = st.validate()
    assert rep.ok, rep.problems
    sel = json.loads((tmp_path / "selection.json").read_text())
    assert all(v["source"] == "replacement (amendment)" for v in sel.values())
    # seeded full-jitter back-off: reproducible, bounded, growing cap, Retry-After respected
    d1 = [acq.backoff("rX", k, None) for k in range(1, 5)]
    assert d1 == [acq.backoff("rX", k, None) for k in range(1, 5)]
    assert all(0 <= d <= 0.01 * 2 ** (k - 1) + 1e-12 for k, d in enumerate(d1, start=1))
    assert acq.backoff("rX", 1, 0.04) == pytest.approx(0.04)
    st.close()


def test_capacity_replacement_only_through_a_recorded_amendment(tmp_path: Path,
                                                               fake: Callable[..., FakeOpenAIServer]) -> None:
    srv = fake(policy=lambda sha, occ: "429" if occ == 0 else "ok")
    be = make_backend("openai/fake-model", base_url=srv.url)
    reqs = _requests(be, 3)
    st, _ = _run(tmp_path, be, reqs)  # retries=0: the paper's no-retry protocol
    assert all([a["status"] for a in st.attempts[r]] == ["capacity_error"] for r in st.plan)
    st.close()
    n = srv.n_requests
    st, _ = _run(tmp_path, be, reqs)  # resuming does not retry without an amendment
    assert srv.n_requests == n
    assert not st.validate().ok
    st.close()
    a = amend(tmp_path, reason="capacity errors in original queue", authorized_by="test author")
    assert a["created_after_queue_complete"] is True and len(a["applies_to"]) == 3
    st, _ = _run(tmp_path, be, reqs)
    assert srv.n_requests == n + 3
    for rid in st.plan:
        assert [(x["kind"], x["status"]) for x in st.attempts[rid]] == [("original", "capacity_error"),
                                                                        ("replacement", "ok")]
    assert st.validate().ok
    with pytest.raises(ConfigError):
        st.amend("again", "me", request_ids=list(st.plan)[:1])  # successful requests are never re-asked
    st.close()


def test_model_access_failure_aborts_without_a_scientific_attempt(tmp_path: Path,
                                                                  fake: Callable[..., FakeOpenAIServer]) -> None:
    srv = fake()
    be = make_backend("openai/fake-model", base_url=srv.url)
    be._key = "sk-wrong-key-0000"  # type: ignore[attr-defined]
    settings = AcquireSettings(concurrency=4, timeout_s=2.0, retries=0)
    st = open_store(tmp_path, {"seed": 7, "settings": be.settings.to_dict(), "acquisition": settings.to_dict()})
    reqs = st.add_requests(_requests(be, 5))
    summary = Acquirer(st, be, settings).run(reqs)
    assert summary.access_error is not None and "401" in summary.access_error
    assert not (tmp_path / "attempts.jsonl").exists() or not _attempts(tmp_path)
    assert (tmp_path / "access_failures.jsonl").read_text().count("\n") >= 1
    st.close()
    # fixing the key resumes cleanly: the access failure is not an interrupted attempt
    be2 = make_backend("openai/fake-model", base_url=srv.url)
    st, _ = _run(tmp_path, be2, _requests(be2, 5))
    assert st.validate().ok
    assert all(a["kind"] == "original" for a in st.iter_attempts())
    st.close()


def test_secrets_never_reach_any_artifact(tmp_path: Path, fake: Callable[..., FakeOpenAIServer],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    env = tmp_path / "cfg.env"
    env.write_text(f"# credentials\nexport OPENAI_API_KEY='{KEY}'\n")
    srv = fake(policy=lambda sha, occ: ("leak_key", "leak_key_error", "ok")[occ % 3])
    be = make_backend("openai/fake-model", base_url=srv.url, env_file=env)
    run = tmp_path / "run"
    st, _ = _run(run, be, _requests(be, 4), retries=1, backoff_base_s=0.0)
    rep = st.validate()
    st.close()
    leaked = [a for a in _attempts(run) if "[REDACTED]" in json.dumps(a)]
    assert leaked, "the fake server did echo the credential"
    for p in run.rglob("*"):
        if p.is_file():
            assert KEY.encode() not in p.read_bytes(), p
    assert rep.n_attempts > 0
    with pytest.raises(ConfigError, match="NOT_SET_KEY"):
        make_backend("openai/x", base_url=srv.url, api_key_env="NOT_SET_KEY", env_file=None)
    with pytest.raises(ConfigError):
        make_backend("openai/x", base_url=f"http://user:{KEY}@127.0.0.1:1/v1")
    with pytest.raises(ConfigError):
        make_backend("anthropic/x", base_url=srv.url)


def test_repeats_are_fresh_calls_and_finished_runs_cost_nothing(tmp_path: Path,
                                                                fake: Callable[..., FakeOpenAIServer]) -> None:
    srv = fake()
    be = make_backend("openai/fake-model", base_url=srv.url)
    reqs = _requests(be, 3, repeats=2)
    assert len({r.prompt_sha256 for r in reqs}) == 3 and len({r.request_id for r in reqs}) == 6
    st, _ = _run(tmp_path, be, reqs)
    assert srv.n_requests == 6                 # same prompt, fresh repeat -> a fresh call
    st.close()
    st, _ = _run(tmp_path, be, reqs)
    assert srv.n_requests == 6                 # cache: (model, parameters, digest, repeat)
    st.close()
    st, _ = _run(tmp_path, be, _requests(be, 3, repeats=3))
    assert srv.n_requests == 9                 # only the new repeat is asked
    st.close()
    other = make_backend("openai/fake-model", base_url=srv.url, reasoning_effort="high")
    with pytest.raises(JournalError):          # the frozen settings cannot change in the same run dir
        _run(tmp_path, other, _requests(other, 1))


def test_usage_and_metadata_are_recorded(tmp_path: Path, fake: Callable[..., FakeOpenAIServer]) -> None:
    srv = fake(model="fake-model-2025-01-31")
    be = make_backend("openai/fake-model", base_url=srv.url, reasoning_effort="high")
    st, _ = _run(tmp_path, be, _requests(be, 4))
    rep = st.validate()
    assert rep.ok, rep.problems
    a = next(st.iter_attempts())
    assert a["runtime_metadata"] == {"model": "fake-model-2025-01-31", "reasoning_effort": "high",
                                     "service_tier": "default"}
    assert set(a["usage"]) == {"input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens"}
    usage = json.loads((tmp_path / "usage_summary.json").read_text())["all"]
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["reasoning_tokens"] <= usage["output_tokens"]
    st.close()
    s = ModelSettings("openai", "gpt-x", reasoning_effort="max")
    assert s.check_observed("gpt-x-2026-02-01", "max", "default") == []
    assert s.check_observed("gpt-x-mini", None, None) and s.check_observed("gpt-x", "low", None)
    assert s.check_observed("gpt-x", None, "flex")


def test_joint_challenge_end_to_end_with_the_mean_rule(tmp_path: Path, fake: Callable[..., FakeOpenAIServer]) -> None:
    g = np.random.default_rng(5)
    blocks = []
    for s in range(3):
        for fam in ("breast_cancer", "wine"):
            for ctx in ("iid", "shift"):
                acts = g.permutation(np.repeat(np.arange(4), 6))
                means = g.permutation([0.45, 0.55, 0.65, 0.75])
                ys = np.round(means[acts] + g.uniform(-0.01, 0.01, 24), 6)
                blocks.append(JointBlock(f"s{s}", fam, ctx, tuple(int(a) for a in acts), tuple(float(y) for y in ys)))
    design = JointDesign(tuple(blocks), namespaces=("AD", "WZ"), forms=("full", "pair"))
    srv = fake(latency_s=0.002)
    be = make_backend("openai/fake-model", base_url=srv.url)
    out = run_joint(design, be, tmp_path, acquire=AcquireSettings(concurrency=8, retries=0))
    assert out.report.ok, out.report.problems
    assert srv.n_requests == design.n_requests == 3 * 2 * 2 * 4 * 2
    assert len(out.results.rows) == 4 * design.n_requests
    prim = out.results.primary_contrast("full")
    assert prim == {"s0": 1.0, "s1": 1.0, "s2": 1.0}  # assignment minus renaming (mean-rule pattern)
    assert out.results.t_gr("00", "00", form="pair", form_e="full") == {"s0": 0.0, "s1": 0.0, "s2": 0.0}
    again = run_joint(design, be, tmp_path, acquire=AcquireSettings(concurrency=8, retries=0))
    assert srv.n_requests == design.n_requests  # re-analysis: zero model calls
    assert again.results.rows == out.results.rows
    assert validate(tmp_path).ok
    plan = [json.loads(x) for x in (tmp_path / "plan.jsonl").read_text().splitlines()]
    assert [p["schedule_index"] for p in plan] == list(range(len(plan)))
    assert [p["meta"]["stream"] for p in plan] != sorted(p["meta"]["stream"] for p in plan)  # seeded shuffle


def test_progress_callback_counts_requests_failures_and_tokens(tmp_path: Path,
                                                               fake: Callable[..., FakeOpenAIServer]) -> None:
    from replaylens.llm import AcquireProgress, acquisition_progress

    srv = fake(policy=lambda sha, occ: "invalid_json" if occ == 0 else "ok")  # every request: one format retry
    be = make_backend("openai/fake-model", base_url=srv.url)
    seen: list[AcquireProgress] = []
    with acquisition_progress(lambda p: seen.append(AcquireProgress(**vars(p)))):
        st, _ = _run(tmp_path, be, _requests(be, 5))
    n_seen = len(seen)
    outside, _ = _run(tmp_path / "outside", be, _requests(be, 2))
    outside.close()
    assert len(seen) == n_seen  # no callback outside the block
    last = seen[-1]
    assert seen[0].done == 0 and seen[0].total == 5
    assert (last.total, last.done, last.calls, last.failed_attempts) == (5, 5, 10, 5)
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    use = [a["usage"] for a in _attempts(tmp_path) if a["usage"] is not None]
    assert last.input_tokens == sum(u["input_tokens"] for u in use) > 0
    assert last.output_tokens == sum(u["output_tokens"] for u in use)
    st.close()
