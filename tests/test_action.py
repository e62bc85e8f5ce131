"""Issue 48, point 7: the composite GitHub Action (action.yml) run step by step on a throwaway project, offline.

Each ``run:`` step is executed with bash exactly as written, its ``${{ … }}`` expressions and ``if:`` conditions
evaluated against a fake ``github`` / ``inputs`` / ``steps`` context, with ``GITHUB_OUTPUT``, ``GITHUB_STEP_SUMMARY``
and ``RUNNER_TEMP`` files as on a runner. The ``uses:`` steps are stood in for locally: ``actions/cache`` saves to and
restores from a directory (so the default branch's run really reaches the pull request), ``upload-artifact`` checks
the files it would upload. ``pip install`` is logged, not run (ReplayLens is installed here already), and ``gh`` is
a script that records the comment it would post.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from replaylens.bandit import make_bandit
from replaylens.records import write_evaluator, write_futures, write_history

yaml = pytest.importorskip("yaml")  # in the dev extra

ROOT = Path(__file__).resolve().parents[1]
ACTION = ROOT / "action.yml"

_TOKEN = re.compile(r"\s*(?:('(?:[^']|'')*')|(==|!=|&&|\|\||!|\(|\)|,)|(true|false|null)\b|(\d+(?:\.\d+)?)|"
                    r"([A-Za-z_][\w.-]*))")


def _to_python(expr: str) -> str:
    """A GitHub Actions expression as Python (the subset action.yml uses), context paths as ``_get("a.b")``."""
    out, pos = [], 0
    while pos < len(expr.rstrip()):
        m = _TOKEN.match(expr, pos)
        assert m is not None, f"cannot read {expr[pos:]!r}"
        s, op, lit, num, name = m.groups()
        pos = m.end()
        if s is not None:
            out.append(repr(s[1:-1].replace("''", "'")))
        elif op is not None:
            out.append({"&&": " and ", "||": " or ", "!": " not "}.get(op, op))
        elif lit is not None:
            out.append({"true": "True", "false": "False", "null": "None"}[lit])
        elif num is not None:
            out.append(num)
        else:
            out.append(name if expr[pos:].lstrip().startswith("(") else f"_get({name!r})")
    return "".join(out)


@dataclass
class Runner:
    """One job running the action: contexts, the step results, a local cache store and what was uploaded."""

    workspace: Path
    github: dict[str, Any]
    inputs: dict[str, str]
    cache: Path
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)
    uploaded: list[Path] = field(default_factory=list)
    failed: bool = False

    def get(self, path: str) -> Any:
        head, *rest = path.split(".")
        node: Any = {"github": self.github, "inputs": self.inputs, "steps": self.steps,
                     "runner": {"os": "Linux", "temp": str(self.temp)}}[head]
        for part in rest:
            node = node.get(part, "") if isinstance(node, dict) else ""
        return node

    @property
    def temp(self) -> Path:
        return self.workspace.parent / "runner-temp"

    def eval(self, expr: str) -> Any:
        funcs = {"always": lambda: True, "success": lambda: not self.failed, "failure": lambda: self.failed,
                 "format": lambda f, *a: re.sub(r"\{(\d+)\}", lambda m: str(a[int(m.group(1))]), f),
                 "contains": lambda a, b: str(b) in str(a)}
        return eval(_to_python(expr), {"__builtins__": {}, "_get": self.get, **funcs})  # our grammar only

    def sub(self, text: Any) -> str:
        return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(self.eval(m.group(1)) or ""), str(text))

    def run(self, env: dict[str, str]) -> None:
        action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
        self.inputs = {k: self.sub(v.get("default", "")) for k, v in action["inputs"].items()} | self.inputs
        self.temp.mkdir(exist_ok=True)
        summary = self.workspace.parent / "step-summary.md"
        for i, step in enumerate(action["runs"]["steps"]):
            sid = step.get("id", f"_{i}")
            cond = step.get("if", "success()")
            if not self.eval(cond):
                self.steps[sid] = {"outputs": {}, "outcome": "skipped", "conclusion": "skipped"}
                continue
            self.ran.append(step["name"])
            ok, outputs = self._uses(step) if "uses" in step else self._run(step, env, summary)
            outcome = "success" if ok else "failure"
            self.steps[sid] = {"outputs": outputs, "outcome": outcome, "conclusion": outcome}
            self.failed |= not ok

    def _run(self, step: dict[str, Any], env: dict[str, str], summary: Path) -> tuple[bool, dict[str, str]]:
        assert step["shell"] == "bash"
        out = self.temp / "github-output"
        out.write_text("")
        step_env = {**env, **{k: self.sub(v) for k, v in step.get("env", {}).items()},
                    "GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(summary), "RUNNER_TEMP": str(self.temp)}
        script = self.temp / "step.sh"
        script.write_text(self.sub(step["run"]))
        res = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=self.workspace,
                             env=step_env, capture_output=True, text=True, timeout=600)
        with (self.temp / "steps.log").open("a") as fh:
            fh.write(f"## {step['name']} -> {res.returncode}\n{res.stdout}{res.stderr}")
        outputs = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
        return res.returncode == 0, outputs

    def _uses(self, step: dict[str, Any]) -> tuple[bool, dict[str, str]]:
        name, args = step["uses"].split("@")[0], {k: self.sub(v) for k, v in step.get("with", {}).items()}
        if name == "actions/upload-artifact":
            for line in args["path"].splitlines():
                p = self.workspace / line.strip()
                if line.strip() and p.exists():
                    self.uploaded.append(p)
            return True, {}
        path = Path(args.get("path", ""))
        if name == "actions/cache/save":
            shutil.copytree(path, self.cache / args["key"])
            return True, {}
        if name == "actions/cache/restore":
            keys = sorted(p.name for p in self.cache.glob("*") if p.name == args["key"]
                          or p.name.startswith(args.get("restore-keys", "\0")))
            if keys:
                shutil.copytree(self.cache / keys[-1], path, dirs_exist_ok=True)
            return True, {"cache-hit": str(bool(keys)).lower()}
        assert name == "actions/cache", name  # the pip cache: nothing to keep offline
        return True, {}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's project: data files and a replaylens.toml (no declared expectation: the gate is the baseline)."""
    d = tmp_path_factory.mktemp("action-project")
    sub = make_bandit(n_streams=4, slots_per_block=8, n_future=2, rng=3)
    (d / "data").mkdir()
    write_history(sub.history, d / "data" / "h.jsonl")
    write_futures(sub.futures, d / "data" / "f.jsonl")
    write_evaluator(sub.evaluator, d / "data" / "u.jsonl")
    (d / "replaylens.toml").write_text('history = "data/h.jsonl"\nfuture = "data/f.jsonl"\n'
                                       'utilities = "data/u.jsonl"\nagent = "mean"\nout = "runs/ci"\n'
                                       'cells = ["value", "pair"]\nresamples = 200\n')
    return d


@pytest.fixture()
def tools(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """PATH with ``replaylens`` (this interpreter's), a ``python`` whose ``-m pip install`` is only logged, and a
    ``gh`` that records its arguments and the comment body."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "tools.log"
    (bin_ / "python").write_text(f'#!/bin/sh\nif [ "$1 $2 $3" = "-m pip install" ]; then echo "pip install $4" >> '
                                 f'"{log}"; exit 0; fi\nexec "{sys.executable}" "$@"\n')
    (bin_ / "gh").write_text(f'#!/bin/sh\necho "gh $*" >> "{log}"\nfor a in "$@"; do case "$a" in body=@*) '
                             f'cat "${{a#body=@}}" >> "{log}";; esac; done\n')
    for f in bin_.iterdir():
        f.chmod(0o755)
    env = {"PATH": f"{bin_}:{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path / "home"),
           "LANG": "C.UTF-8", "REPLAYLENS_CACHE": str(tmp_path / "requests.sqlite")}
    return env, log


def _job(project: Path, tmp: Path, name: str, cache: Path, *, event: str, ref: str, sha: str,
         inputs: dict[str, str] | None = None) -> Runner:
    ws = tmp / name / "workspace"
    shutil.copytree(project, ws)
    github = {"action_path": str(ROOT), "action_ref": "", "event_name": event, "ref": ref, "sha": sha,
              "repository": "someone/agent-project", "token": "t0ken",
              "event": {"repository": {"default_branch": "main"}, "pull_request": {"number": 7}}}
    return Runner(ws, github, dict(inputs or {}), cache)


def test_the_action_gates_a_pull_request_against_the_default_branch(project: Path, tmp_path: Path,
                                                                   tools: tuple[dict[str, str], Path]) -> None:
    env, log = tools
    cache = tmp_path / "actions-cache"
    cache.mkdir()
    # 1. a push to the default branch: audit, upload, summary, and the run kept as the baseline
    main = _job(project, tmp_path, "main", cache, event="push", ref="refs/heads/main", sha="a" * 40,
                inputs={"fail-on": "action:0.05"})
    main.run(env)
    steps_log = (main.temp / "steps.log").read_text()
    assert not main.failed, steps_log
    assert main.steps["plan"]["outputs"]["out"] == "runs/ci"          # read from the project's config
    assert f"pip install {ROOT}" in log.read_text()
    junit = main.workspace / "replaylens-junit.xml"
    assert junit.is_file() and "<testcase" in junit.read_text()
    assert {p.name for p in main.uploaded} == {"report.html", "report.md", "summary.json", "replaylens-junit.xml"}
    summary = (main.workspace.parent / "step-summary.md").read_text()
    assert "### ReplayLens audit: mean" in summary and "artifact `replaylens-report`" in summary
    assert main.steps["keep"]["outcome"] == "success"
    stored = cache / f"replaylens-baseline-main-{'a' * 40}"
    assert (stored / "summary.json").is_file() and (stored / "SOURCE").read_text().strip() == "a" * 40
    assert not (stored / "summary.json").is_symlink()

    # 2. a pull request whose agent became order-dependent: compared with main's run, fails, comments
    pr = _job(project, tmp_path, "pr", cache, event="pull_request", ref="refs/pull/7/merge", sha="b" * 40,
              inputs={"fail-on": "action:0.05", "args": "--agent order-sensitive", "comment": "true"})
    pr.run(env)
    steps_log = (pr.temp / "steps.log").read_text()
    assert pr.failed and pr.steps["audit"]["outcome"] == "failure", steps_log
    assert pr.steps["audit"]["outputs"]["baseline"] == "found"
    summary = (pr.workspace.parent / "step-summary.md").read_text()
    assert f"Compared with the default branch's last run ({'a' * 40})" in summary
    assert "### ReplayLens audit: order-sensitive" in summary and "regression: pair: action" in summary
    assert pr.uploaded, "the report is uploaded even when the gate fails"
    assert pr.steps["keep"]["outcome"] == "skipped"                 # a pull request never replaces the baseline
    gh = log.read_text()
    assert "gh api -X POST repos/someone/agent-project/issues/7/comments" in gh
    assert "<!-- replaylens-action -->" in gh and "order-sensitive" in gh


def test_a_pull_request_before_any_default_branch_run_says_so(project: Path, tmp_path: Path,
                                                             tools: tuple[dict[str, str], Path]) -> None:
    env, log = tools
    cache = tmp_path / "empty-cache"
    cache.mkdir()
    pr = _job(project, tmp_path, "pr", cache, event="pull_request", ref="refs/pull/3/merge", sha="c" * 40,
              inputs={"fail-on": "action:0.05"})
    pr.run(env)
    assert not pr.failed, (pr.temp / "steps.log").read_text()
    assert pr.steps["audit"]["outputs"]["baseline"] == "none"
    summary = (pr.workspace.parent / "step-summary.md").read_text()
    assert "No run of the default branch is stored yet" in summary
    assert "Comment on the pull request" not in pr.ran and "gh " not in (log.read_text() if log.exists() else "")


def test_every_step_is_understood_and_run_scripts_read_only_env() -> None:
    """The runner above knows every step; ``run:`` scripts take inputs through ``env:`` only (no ``${{ }}`` in a
    script: an input can never be spliced into bash)."""
    action = yaml.safe_load(ACTION.read_text(encoding="utf-8"))
    for step in action["runs"]["steps"]:
        if "run" in step:
            assert "${{" not in step["run"], step["name"]
        else:
            assert step["uses"].split("@")[0] in ("actions/cache", "actions/cache/restore", "actions/cache/save",
                                                  "actions/upload-artifact"), step["uses"]
        if "if" in step:
            _to_python(step["if"])
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "OWNER/" not in readme and "uses: <owner>/replaylens@" in readme and "no public GitHub home" in readme
    assert os.access(ACTION, os.R_OK)
