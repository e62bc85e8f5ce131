"""CI outputs (issue 24): JUnit XML in the shape pytest's own --junit-xml writes, the GitHub step summary,
and the README's CI recipe run as written (adapted to this checkout's path)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from replaylens.bandit import make_bandit
from replaylens.cli._main import cli
from replaylens.records import write_evaluator, write_futures, write_history

pytestmark = pytest.mark.slow  # end-to-end runs: left out of the fast subset (README)

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """history = "data/history.jsonl"
future = "data/future.jsonl"
utilities = "data/utilities.jsonl"
agent = "order-sensitive"
out = "runs/ci"
cells = ["value", "pair", "reorder"]
maps = "1032"
resamples = 200

[expect]
pair = "invariant"
reorder = { kind = "invariant", tolerance = 0.5 }
"""


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    sub = make_bandit(n_streams=4, n_future=4)
    write_history(sub.history, tmp_path / "data" / "history.jsonl")
    write_futures(sub.futures, tmp_path / "data" / "future.jsonl")
    write_evaluator(sub.evaluator, tmp_path / "data" / "utilities.jsonl")
    (tmp_path / "replaylens.toml").write_text(CONFIG, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("REPLAYLENS_CONFIG", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    return tmp_path


def _pytest_reference(tmp: Path) -> ET.Element:
    """pytest's own --junit-xml output for one passing and one failing test: the reference shape."""
    (tmp / "ref").mkdir()
    (tmp / "ref" / "test_ref.py").write_text("def test_ok():\n    pass\n\ndef test_bad():\n    assert 0, 'no'\n")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junit-xml",
                    str(tmp / "ref.xml"), str(tmp / "ref")], capture_output=True, text=True, cwd=tmp, check=False)
    return ET.parse(tmp / "ref.xml").getroot()


def test_junit_xml_has_pytests_shape_and_names_the_failure(project: Path) -> None:
    res = CliRunner().invoke(cli, ["audit", "--junit-xml", "out/junit.xml", "--quiet"])
    assert res.exit_code == 1, res.output
    root = ET.parse(project / "out" / "junit.xml").getroot()
    ref = _pytest_reference(project)
    assert root.tag == ref.tag == "testsuites"
    suites, ref_suite = root.findall("testsuite"), ref.find("testsuite")
    assert len(suites) == 1 and ref_suite is not None
    counts = ("tests", "failures", "errors", "skipped")
    assert set(counts) | {"name", "time"} <= set(suites[0].attrib) & set(ref_suite.attrib)
    ref_case = ref_suite.find("testcase")
    assert ref_case is not None
    cases = suites[0].findall("testcase")
    for tc in cases:
        assert set(tc.attrib) == set(ref_case.attrib) == {"classname", "name", "time"}
        assert float(tc.attrib["time"]) >= 0 and [c.tag for c in tc] in ([], ["failure"], ["skipped"])
    ref_failure = ref_suite.find("testcase/failure")
    assert ref_failure is not None and "message" in ref_failure.attrib
    # counts agree with the children, per suite and in total, as CI systems read them
    n = {"tests": len(cases), "failures": len(root.findall(".//failure")), "errors": 0,
         "skipped": len(root.findall(".//skipped"))}
    for c in counts:
        assert int(suites[0].attrib[c]) == n[c], c
        assert c == "skipped" or int(root.attrib[c]) == n[c], c
    # one testcase per expectation: the declared two and the defaults of the other rows (value, rekey)
    names = [tc.attrib["name"] for tc in cases]
    assert names == ["value: responds", "pair: invariant", "reorder: invariant (margin 0.5)", "rekey: responds"]
    failures = root.findall(".//failure")
    assert len(failures) == 1  # pair; value's default "responds" is not gated: a skipped case if it fails
    msg = failures[0].attrib["message"]
    assert msg.startswith("expectation failed: pair declared invariant, but 16 of 48 decisions changed")
    m = re.search(r"; e\.g\. stream (\S+), task (\S+) \(.*\), map id, draw 0: (\w+) -> (\w+) \(utility", msg)
    assert m is not None and m.group(3) != m.group(4), msg  # one concrete changed decision
    assert "slot " in (failures[0].text or "") and "before (" in (failures[0].text or "")  # its records


def test_step_summary_is_appended_when_github_sets_it(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = project / "step-summary.md"
    target.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    res = CliRunner().invoke(cli, ["audit", "--expect", "pair=free", "--quiet"])
    assert res.exit_code == 0, res.output
    text = target.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n### ReplayLens audit: order-sensitive\n")
    assert "**UNSAFE** (declared expectations passed)" in text  # a default red flag shows, the gate passed
    assert "- **NOT JUDGED**: reordering intact records (pair)" in text
    assert "Full report: `runs/ci/report.html`" in text


def _recipe() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("The CI recipe, as the test suite runs it"):]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    return [ln.split("#")[0].strip() for ln in block.group(1).splitlines() if ln.split("#")[0].strip()]


def test_action_yml_runs_the_recipes_commands() -> None:
    action = (ROOT / "action.yml").read_text(encoding="utf-8")
    install, audit = _recipe()
    assert install.startswith("python -m pip install ") and audit.startswith("replaylens audit --junit-xml ")
    # from the action's own checkout, not PyPI (inputs reach the scripts through env: only, see tests/test_action.py)
    assert '-m pip install "$RL_ACTION_PATH"' in action and "RL_ACTION_PATH: ${{ github.action_path }}" in action
    assert re.search(r'replaylens audit --out "\$RL_OUT" \\\n\s+--junit-xml "\$RL_JUNIT" --quiet', action)
    assert "RL_JUNIT: ${{ inputs.junit-xml }}" in action
    assert "pip install replaylens" not in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_readme_ci_recipe_runs(project: Path) -> None:
    """The recipe's two commands in a fresh virtual environment: the install points at this checkout
    (``--no-deps``: the dependencies come from the test environment through a .pth file, so no
    registry is needed for them), then the audit reads replaylens.toml and fails the declared gate."""
    env_dir = project / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    deps = [p for p in sys.path if p.endswith("site-packages")]
    Path(site, "test-deps.pth").write_text("\n".join(deps) + "\n", encoding="utf-8")
    install, audit = _recipe()
    install = install.replace("python -m pip install ./replaylens", f"{py} -m pip install -q --no-deps {ROOT}")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REPLAYLENS_CONFIG")}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env['PATH']}"
    done = subprocess.run(install, shell=True, cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    ran = subprocess.run(audit, shell=True, cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert ran.returncode == 1, ran.stderr[-2000:]  # the order-sensitive agent breaks the declared pair gate
    assert ran.stderr.strip().splitlines()[-1].startswith("expectation failed: pair declared invariant")
    which = subprocess.run([str(py), "-c", "import replaylens; print(replaylens.__file__)"], capture_output=True,
                           text=True, env=env, cwd=project, check=True).stdout
    assert str(env_dir) in which  # the installed copy ran, not this checkout
    root = ET.parse(project / "replaylens-junit.xml").getroot()
    assert root.attrib["failures"] == "1"


def test_gate_options_on_several_agents_are_refused_not_ignored(project: Path) -> None:
    res = CliRunner().invoke(cli, ["audit", "--agent", "mean", "--agent", "latest", "--junit-xml", "j.xml"])
    assert res.exit_code == 2 and not (project / "j.xml").exists()
    assert res.stderr.strip().splitlines() == [
        "replaylens: error: --expect, --junit-xml judge one agent per run; audit each agent on its own (or compare "
        "their OUT/<agent> directories with `replaylens compare`)"]
