"""report.html: self-contained, offline, and its explanations are what the replay engine fed the agent."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from replaylens.agents import load_agent
from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.replay import prepare_streams, replay
from replaylens.replay._engine import _shard
from replaylens.report import changed_examples, consequences

FAST = ["--resamples", "300", "--streams", "4", "--scripted"]


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("html") / "run"
    res = CliRunner().invoke(cli, ["demo", "--out", str(out), *FAST])
    assert res.exit_code == 0, res.output
    return out


class _Refs(HTMLParser):
    """Every id and every attribute that could load something (src, href, srcset, data, action, poster)."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.refs: list[tuple[str, str, str]] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for k, v in attrs:
            if k == "id" and v:
                self.ids.add(v)
            if k in ("src", "href", "xlink:href", "srcset", "data", "action", "poster") and v is not None:
                self.refs.append((tag, k, v))


def offline_problems(html: str) -> list[str]:
    """Anything in the page that could make a request leave it."""
    p = _Refs()
    p.feed(html)
    local = [f"{t} {k}={v[:40]}" for t, k, v in p.refs
             if v.startswith(("#", "data:")) or (t == "a" and k == "href" and not re.match(r"\w+:", v))]
    bad = [f"{t} {k}={v[:40]}" for t, k, v in p.refs if f"{t} {k}={v[:40]}" not in local]
    bad += [m.group(0) for m in re.finditer(r"(https?:)?//[\w.-]+\.\w+", html)]
    bad += [f"<{t}>" for t in ("script", "link", "iframe", "img", "object", "embed") if t in p.tags]
    bad += re.findall(r"@import|url\((?!#)", html)
    return bad


def test_demo_writes_a_self_contained_report(demo_dir: Path) -> None:
    html = (demo_dir / "report.html").read_text(encoding="utf-8")
    assert offline_problems(html) == []
    p = _Refs()
    p.feed(html)
    for i in ("verdicts", "cell-table", "forest", "heatmap", "consequence-table", "examples", "provenance",
              "row-value", "examples-value", "examples-rekey"):
        assert i in p.ids, i
    assert html.count("<svg") >= 2  # forest and heatmap inline
    assert "default-src 'none'" in html  # the browser refuses any fetch, too
    assert "moving scores across actions (value): changes decisions" in html
    for sha in re.findall(r'"sha256": "(\w+)"', (demo_dir / "manifest.json").read_text()):
        assert sha in html
    assert "#D55E00" in html and "#0072B2" in html  # Okabe-Ito colours in the page


def _bandit_decisions():  # type: ignore[no-untyped-def]
    sub = make_bandit(n_streams=3, n_future=4)
    agent = load_agent("mean")
    dec = replay(sub.history, sub.futures, sub.evaluator, agent, cells="value,pair,key_slot,mask,rename",
                 maps="1032+1230", draws=2)
    return sub, dec


def test_examples_show_what_the_engine_fed_the_agent() -> None:
    sub, dec = _bandit_decisions()
    ex = changed_examples(dec, sub.history, sub.futures, per_row=3, max_records=10_000)
    plan = dec.plan
    assert {k for k, v in ex.items() if v} >= {"value", "key_slot", "mask", "rekey"}
    n_checked = 0
    for row, items in ex.items():
        c = 0 if row == "rekey" else plan.cell_names.index(row)
        for e in items:
            assert e["before_action"] != e["after_action"]
            sd = prepare_streams(plan, sub.history, sub.futures)[e["stream"]]
            tb = _shard(plan, [sd]).transforms[(c, e["draw"])]  # the vectorized path's transformed history
            m = plan.map_names.index(e["map"])
            keys = tb.keys[0, m]
            outs = tb.outcomes[0]
            shown = {x["slot"]: x for x in e["records"]}
            for t in range(e["visible_records"]):
                slot = int(sd.slots[t])
                changed = keys[t] != sd.codes[t] or not np.array_equal(outs[t], sd.outcomes[t], equal_nan=True) \
                    or tb.tasks[0, t] != t
                assert (slot in shown) == bool(changed), (row, e["stream"], slot)
                if slot in shown:
                    x = shown[slot]
                    assert x["key_after"] == plan.labels[int(keys[t])]
                    assert x["outcome_after"] == ("masked" if np.isnan(outs[t]) else f"{outs[t]:.3g}")
                    n_checked += 1
            # the decisions named are those in the decision table
            i = next(k for k in range(dec.n_tasks) if plan.streams[dec.stream_idx[k]] == e["stream"]
                 and dec.task_ids[k] == e["task"])
            assert plan.labels[dec.actions[c, m, e["draw"], 0, i]] == e["after_action"]
            assert plan.labels[dec.actions[0, 0, 0, 0, i]] == e["before_action"]
    assert n_checked > 20


def test_consequences_add_up_against_the_decision_table(tmp_path: Path) -> None:
    _sub, dec = _bandit_decisions()
    cons = consequences(dec)
    df = dec.frame()
    base = df[(df["cell"] == "aligned") & (df["map"] == "id")].set_index(["stream", "task", "draw", "repeat"])
    for row in ("value", "key_slot", "mask", "rename", "rekey"):
        sel = df[df["cell"] == ("aligned" if row == "rekey" else row)]
        sel = sel[sel["map"] != "id"] if row in ("rename", "rekey") else sel[sel["map"] == "id"]
        # with draws > 1 the aligned baseline is the draw-0 decision (aligned does not depend on σ)
        b = base.xs(0, level="draw").reindex(pd_index(sel))
        moved = sel.action.to_numpy() != b.action.to_numpy()
        du = sel.utility.to_numpy()[moved] - b.utility.to_numpy()[moved]
        c = cons[row]
        assert c["n_changed"] == int(moved.sum()) and c["n_decisions"] == len(sel)
        assert (c["harm"], c["gain"]) == (int((du < -1e-12).sum()), int((du > 1e-12).sum()))
        assert c["harm"] + c["tie"] + c["gain"] == c["n_changed"]
    assert cons["value"]["harm"] > 0


def pd_index(sel):  # type: ignore[no-untyped-def]
    import pandas as pd

    return pd.MultiIndex.from_arrays([sel.stream, sel.task, sel.repeat])


def test_examples_say_what_moved_where() -> None:
    sub = make_bandit(n_streams=3, n_future=4)
    dec = replay(sub.history, sub.futures, sub.evaluator, load_agent("latest"), cells="pair,reorder,value",
                 maps="id")
    ex = changed_examples(dec, sub.history, sub.futures)
    srcs = {row: {x["source"].split(" from slot")[0] for e in items for x in e["records"]} for row, items in ex.items()}
    assert srcs["pair"] == {"pair (key, outcome)"}
    assert srcs["reorder"] == {"whole event (task, key, outcome)"}
    for e in ex["pair"]:  # a moved pair keeps its key with its outcome: the multiset of pairs is unchanged
        before = sorted((x["key_before"], x["outcome_before"]) for x in e["records"])
        assert before == sorted((x["key_after"], x["outcome_after"]) for x in e["records"]) or e["hidden"]
