"""Textual bridge: prompt serialization, namespaces, output schema, decoding and digests.

Item order follows the paper (partB §5.3): domain, context, phase and task index, action
descriptions, optional producer-key dictionary, ledger semantics, numbered records, answer
constraint.  Records read ``NN | key=K | utility=0.123456``.  Each item is padded with spaces to a
fixed character budget before its answer prefix, so prompt length cannot reveal the cell.  A
request holds one or more numbered items and asks for a JSON object ``{"item_01": TOKEN, ...}``
whose per-item enum lists the displayed menu tokens in menu-row order (never re-sorted).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..agents import to_micro
from ..errors import ConfigError

__all__ = [
    "DECISION_INSTRUCTION",
    "NAMESPACES",
    "Binding",
    "ItemDecoder",
    "MenuRow",
    "ParsedItem",
    "PromptItem",
    "PromptTemplate",
    "ShownRecord",
    "TextNamespace",
    "canonical_json",
    "decode_response",
    "format_utility",
    "item_key",
    "output_schema",
    "parse_prompt",
    "render_item",
    "render_prompt",
    "sha256_text",
]

DECISION_INSTRUCTION = (
    "The ledger contains only selected outcomes. A measured utility is comparable across actions, and higher "
    "utility is better. Do not infer or invent unselected outcomes. Use the ledger when it is informative and keep "
    "the decision rule consistent across tasks. The ledger preserves every selected attempt in chronological order; "
    "measured utility is the available feedback."
)
"""The paper's full-history decision instruction, verbatim (l.2348)."""

ITEM_TEMPLATE = (
    "Domain: {domain}\n"
    "Context: {context}\n"
    "Phase: {phase}, task {task}\n"
    "Actions (choose exactly one):\n"
    "{actions}\n"
    "{dictionary}"
    "Ledger semantics: {instruction}\n"
    "Records:\n"
    "{records}\n"
)
ANSWER_TEMPLATE = "Answer with exactly one action: {choices}.\nAnswer:"
HEADER_TEMPLATE = (
    "You will make {n} independent decision{s}. Each numbered item is a separate task with its own ledger; "
    "decide each item only from its own text."
)
FOOTER_TEMPLATE = (
    "Return only a JSON object with exactly the keys {keys}; the value of each key is exactly one action token "
    "listed for that item."
)
ITEM_FIELDS = ("domain", "context", "phase", "task", "actions", "dictionary", "instruction", "records")


def canonical_json(obj: Any) -> str:
    """Canonical JSON (UTF-8 text, sorted keys, no spaces), as the provenance files use it."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def item_key(i: int) -> str:
    """The JSON key of item ``i`` (0-based): ``item_01``, ``item_02``, ..."""
    return f"item_{i + 1:02d}"


def format_utility(u: float | None) -> str | None:
    """Six-decimal display from integer micro-units (the same rounding as the reference rules); None if masked."""
    if u is None or (isinstance(u, float) and math.isnan(u)):
        return None
    m = int(to_micro(float(u)))
    sign = "-" if m < 0 else ""
    m = abs(m)
    return f"{sign}{m // 1_000_000}.{m % 1_000_000:06d}"


# ---------------------------------------------------------------------------------------------- namespaces

_ALIASES = ("spread", "focus", "near", "blend")


def _letters(start: str, n: int, stop: str = "z") -> tuple[str, ...]:
    k = ord(stop) - ord(start) + 1
    if n > k:
        raise ConfigError(f"namespace starting at {start!r} has only {k} tokens; the vocabulary has {n} labels")
    return tuple(chr(ord(start) + i) for i in range(n))


def _fixed(tokens: tuple[str, ...], n: int, name: str) -> tuple[str, ...]:
    if n > len(tokens):
        raise ConfigError(f"namespace {name!r} has {len(tokens)} tokens; the vocabulary has {n} labels")
    return tokens[:n]


@dataclass(frozen=True)
class TextNamespace:
    """How labels are displayed.

    ``producer`` namespaces (the paper's GPT-5.6 / Qwen bridges): records show the producer key
    φ(label); the menu and the answer vocabulary are the action labels themselves, and a producer-key
    dictionary binds keys to actions whenever φ is not the identity.
    ``joint`` namespaces (the GPT-6 Astra renaming control and the joint challenge): history records
    and menu rows both show tokens, the answer is a token, and no dictionary is shown.
    ``tokens(n)`` gives the token of each vocabulary index (None: the labels themselves).
    """

    name: str
    kind: str = "producer"  # "producer" | "joint"
    token_list: tuple[str, ...] | None = None
    generator: str | None = None  # "letters:q", "letters:A", "K"

    def __post_init__(self) -> None:
        if self.kind not in ("producer", "joint"):
            raise ConfigError(f"namespace kind must be 'producer' or 'joint'; got {self.kind!r}")

    @property
    def joint(self) -> bool:
        return self.kind == "joint"

    @property
    def readable(self) -> bool:
        return self.token_list is None and self.generator is None

    def tokens(self, n: int) -> tuple[str, ...] | None:
        if self.token_list is not None:
            return _fixed(self.token_list, n, self.name)
        if self.generator is None:
            return None
        if self.generator == "K":
            return tuple(f"K{i}" for i in range(n))
        start = self.generator.split(":", 1)[1]
        return _letters(start, n, "Z" if start.isupper() else "z")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind,
                "tokens": list(self.token_list) if self.token_list is not None else None,
                "generator": self.generator}


NAMESPACES: dict[str, TextNamespace] = {
    # producer-key namespaces (records show keys; menu/answers are action labels)
    "arm": TextNamespace("arm"),
    "opaque": TextNamespace("opaque", generator="letters:q"),
    "alias": TextNamespace("alias", token_list=_ALIASES),
    "k": TextNamespace("k", generator="K"),
    # joint namespaces (history and menu both show tokens; answers are tokens)
    "AD": TextNamespace("AD", "joint", generator="letters:A"),
    "WZ": TextNamespace("WZ", "joint", token_list=("W", "X", "Y", "Z")),
    "semantic": TextNamespace("semantic", "joint", token_list=_ALIASES),
    "opaque-joint": TextNamespace("opaque-joint", "joint", generator="letters:q"),
    "labels-joint": TextNamespace("labels-joint", "joint"),
}


def resolve_namespace(ns: str | TextNamespace) -> TextNamespace:
    if isinstance(ns, TextNamespace):
        return ns
    if ns not in NAMESPACES:
        raise ConfigError(f"unknown namespace {ns!r}; use one of {', '.join(NAMESPACES)}")
    return NAMESPACES[ns]


@dataclass(frozen=True)
class Binding:
    """A namespace bound to an action vocabulary (canonical order): label ↔ displayed token."""

    namespace: TextNamespace
    vocabulary: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(set(self.vocabulary)) != len(self.vocabulary):
            raise ConfigError(f"duplicate labels in the action vocabulary {self.vocabulary}")
        toks = self.tokens
        if toks is not None and len(set(toks)) != len(toks):
            raise ConfigError(f"namespace {self.namespace.name!r} tokens are not distinct")

    @property
    def tokens(self) -> tuple[str, ...] | None:
        return self.namespace.tokens(len(self.vocabulary))

    def token(self, label: str) -> str:
        toks = self.tokens
        if toks is None:
            return label
        try:
            return toks[self.vocabulary.index(label)]
        except ValueError:
            raise ConfigError(f"label {label!r} is not in the declared action vocabulary {list(self.vocabulary)}; "
                              "pass every menu label in `actions`") from None

    def label(self, token: str) -> str:
        toks = self.tokens
        if toks is None:
            return token
        return self.vocabulary[toks.index(token)]

    def dictionary(self) -> tuple[tuple[str, str], ...] | None:
        """Producer-key dictionary (key, action label), or None when the keys are the labels."""
        toks = self.tokens
        if toks is None or self.namespace.joint:
            return None
        return tuple(zip(toks, self.vocabulary, strict=True))


# ---------------------------------------------------------------------------------------------- items

@dataclass(frozen=True)
class ShownRecord:
    """One displayed ledger record: producer field and utility (None = masked)."""

    key: str
    utility: float | None


@dataclass(frozen=True)
class MenuRow:
    """One displayed menu row: the answer token and an optional description."""

    token: str
    description: str | None = None


@dataclass(frozen=True)
class PromptItem:
    """The structured content of one decision block (the rendered text is what gets hashed)."""

    domain: str
    context: str
    phase: str
    index: int
    menu: tuple[MenuRow, ...]
    records: tuple[ShownRecord, ...]
    dictionary: tuple[tuple[str, str], ...] | None = None
    n_tasks: int | None = None

    @property
    def tokens(self) -> tuple[str, ...]:
        return tuple(r.token for r in self.menu)


@dataclass(frozen=True)
class ItemDecoder:
    """Answer vocabulary of one item (menu-row order) and the token → semantic label decoding."""

    enum: tuple[str, ...]
    decode: Mapping[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"enum": list(self.enum), "decode": dict(self.decode)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ItemDecoder:
        return cls(tuple(d["enum"]), dict(d["decode"]))


def _choices(tokens: Sequence[str]) -> str:
    if len(tokens) == 1:
        return tokens[0]
    if len(tokens) == 2:
        return f"{tokens[0]} or {tokens[1]}"
    return ", ".join(tokens[:-1]) + f", or {tokens[-1]}"


@dataclass(frozen=True)
class PromptTemplate:
    """Prompt template: the paper's layout and decision instruction by default.

    ``item`` is a ``str.format`` template with the fields domain, context, phase, task, actions,
    dictionary, instruction and records; ``answer`` (with ``{choices}``) follows the padding.
    ``budget`` is the number of characters of each item before its answer prefix (padded with
    spaces and one newline); None disables padding.  ``header``/``footer`` wrap the numbered items.
    """

    instruction: str = DECISION_INSTRUCTION
    item: str = ITEM_TEMPLATE
    answer: str = ANSWER_TEMPLATE
    header: str = HEADER_TEMPLATE
    footer: str = FOOTER_TEMPLATE
    budget: int | None = 6000
    system: str | None = None

    def __post_init__(self) -> None:
        if "{records}" not in self.item:
            raise ConfigError("a prompt template's item text must contain {records}")
        if "{choices}" not in self.answer:
            raise ConfigError("a prompt template's answer text must contain {choices}")
        if self.budget is not None and self.budget < 1:
            raise ConfigError(f"budget must be a positive number of characters or None; got {self.budget}")
        try:
            self.item.format(**dict.fromkeys(ITEM_FIELDS, ""))
            self.answer.format(choices="")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(f"invalid prompt template field: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        return {"instruction": self.instruction, "item": self.item, "answer": self.answer, "header": self.header,
                "footer": self.footer, "budget": self.budget, "system": self.system}

    def sha256(self) -> str:
        return sha256_text(canonical_json(self.to_dict()))

    def with_budget(self, budget: int | None) -> PromptTemplate:
        return PromptTemplate(self.instruction, self.item, self.answer, self.header, self.footer, budget, self.system)

    @classmethod
    def from_file(cls, path: str | Path) -> PromptTemplate:
        """Load a JSON file with any of the fields (instruction, item, answer, header, footer, budget, system)."""
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read prompt template {p}: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"prompt template {p} must be a JSON object")
        unknown = set(data) - set(cls().to_dict())
        if unknown:
            raise ConfigError(f"prompt template {p}: unknown fields {sorted(unknown)}")
        return cls(**data)


def render_item(item: PromptItem, template: PromptTemplate) -> str:
    """One item's exact text: body, padding to the budget, answer constraint."""
    actions = "\n".join(f"- {r.token}: {r.description}" if r.description else f"- {r.token}" for r in item.menu)
    dictionary = ""
    if item.dictionary:
        dictionary = "Producer keys: " + ", ".join(f"{k} = {a}" for k, a in item.dictionary) + "\n"
    width = max(2, len(str(len(item.records))))
    lines = []
    for s, rec in enumerate(item.records, start=1):
        u = format_utility(rec.utility)
        lines.append(f"{s:0{width}d} | key={rec.key}" + ("" if u is None else f" | utility={u}"))
    records = "\n".join(lines) if lines else "(none)"
    task = f"{item.index + 1:02d}" + (f" of {item.n_tasks:02d}" if item.n_tasks else "")
    body = template.item.format(domain=item.domain, context=item.context, phase=item.phase, task=task,
                                actions=actions, dictionary=dictionary, instruction=template.instruction,
                                records=records)
    if template.budget is not None:
        room = template.budget - len(body)
        if room < 0:
            raise ConfigError(f"a prompt item needs {len(body)} characters before its answer prefix but the budget "
                              f"is {template.budget} ({len(item.records)} records); raise the budget or set it to None")
        if room > 0:
            body += " " * (room - 1) + "\n"
    return body + template.answer.format(choices=_choices(item.tokens))


def assemble_prompt(header: str, bodies: Sequence[str], footer: str) -> str:
    """The exact user message of one request: ``header`` (``{n}`` items, plural ``{s}``), the item
    ``bodies`` as numbered ``=== Item i of n ===`` blocks, and ``footer`` (the answer ``{keys}``)."""
    if not bodies:
        raise ConfigError("a request needs at least one item")
    n = len(bodies)
    parts = [header.format(n=n, s="" if n == 1 else "s")]
    parts += [f"=== Item {i + 1} of {n} ===\n{body}" for i, body in enumerate(bodies)]
    parts.append(footer.format(keys=", ".join(f'"{item_key(i)}"' for i in range(n))))
    return "\n\n".join(parts) + "\n"


def render_prompt(items: Sequence[PromptItem], template: PromptTemplate) -> str:
    """The exact user message of one request: header, numbered items, output instruction."""
    return assemble_prompt(template.header, [render_item(it, template) for it in items], template.footer)


def output_schema(decoders: Sequence[ItemDecoder]) -> dict[str, Any]:
    """JSON schema of the answer: one enum per item, tokens in menu-row order (not re-sorted)."""
    props = {item_key(i): {"type": "string", "enum": list(d.enum)} for i, d in enumerate(decoders)}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


@dataclass(frozen=True)
class Decoded:
    """A response parsed against a request's schema."""

    ok: bool
    tokens: tuple[str, ...] = ()
    actions: tuple[str, ...] = ()
    error: str | None = None
    parsed: Any = field(default=None, compare=False)


def decode_response(text: str | None, decoders: Sequence[ItemDecoder]) -> Decoded:
    """Validate a raw response against the schema and decode every token to its semantic label."""
    if text is None or not text.strip():
        return Decoded(False, error="empty output")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return Decoded(False, error=f"invalid JSON: {exc.msg} at position {exc.pos}")
    if not isinstance(obj, dict):
        return Decoded(False, error=f"expected a JSON object, got {type(obj).__name__}", parsed=obj)
    want = [item_key(i) for i in range(len(decoders))]
    if sorted(obj) != sorted(want):
        return Decoded(False, error=f"keys {sorted(obj)} differ from {want}", parsed=obj)
    toks: list[str] = []
    acts: list[str] = []
    for k, d in zip(want, decoders, strict=True):
        v = obj[k]
        if not isinstance(v, str) or v not in d.enum:
            return Decoded(False, error=f"{k}: {v!r} is not one of {list(d.enum)}", parsed=obj)
        toks.append(v)
        acts.append(d.decode[v])
    return Decoded(True, tuple(toks), tuple(acts), parsed=obj)


# ---------------------------------------------------------------------------------------------- parsing

_ITEM_RE = re.compile(r"^=== Item (\d+) of (\d+) ===$", re.M)
_REC_RE = re.compile(r"^(\d+) \| key=(.+?)(?: \| utility=(-?\d+\.\d{6}))?\s*$")
_ROW_RE = re.compile(r"^- (\S+?)(?::(?: .*)?)?$")


@dataclass(frozen=True)
class ParsedItem:
    """What a textual stand-in reads from one item of the default layout."""

    menu: tuple[str, ...]
    records: tuple[tuple[str, int | None], ...]  # (displayed key, utility in micro-units or None)
    dictionary: Mapping[str, str]


@dataclass(frozen=True)
class ItemSections:
    """One numbered item of a prompt split into its sections (shared by the textual stand-ins)."""

    menu: tuple[str, ...]  # tokens of the ``- TOKEN: description`` rows of the Actions section
    records: tuple[str, ...]  # the lines under ``Records:``, up to the answer constraint
    other: tuple[str, ...]  # every other line before the answer constraint


def item_sections(text: str) -> list[ItemSections]:
    """Split a prompt into its ``=== Item i of n ===`` items and each item into menu, records and the rest."""
    marks = list(_ITEM_RE.finditer(text))
    out: list[ItemSections] = []
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        menu: list[str] = []
        records: list[str] = []
        other: list[str] = []
        mode = ""
        for line in text[m.end():end].splitlines():
            if line.startswith("Answer with exactly one action:"):
                break
            if line.startswith("Actions"):
                mode = "actions"
                continue
            if line.startswith("Records:"):
                mode = "records"
                continue
            if mode == "actions":
                rm = _ROW_RE.match(line)
                if rm:
                    menu.append(rm.group(1))
                    continue
                mode = ""
            (records if mode == "records" else other).append(line)
        out.append(ItemSections(tuple(menu), tuple(records), tuple(other)))
    return out


def parse_prompt(text: str) -> list[ParsedItem]:
    """Read the numbered items of a prompt in the default layout (used by the scripted stand-ins).

    Menu tokens come from the ``- TOKEN: description`` rows of the Actions section, records from
    ``NN | key=K | utility=U`` lines, the dictionary from a ``Producer keys:`` line.
    """
    out: list[ParsedItem] = []
    for sec in item_sections(text):
        dictionary: dict[str, str] = {}
        for line in sec.other:
            if line.startswith("Producer keys: "):
                for pair in line[len("Producer keys: "):].split(", "):
                    k, _, a = pair.partition(" = ")
                    dictionary[k.strip()] = a.strip()
        records: list[tuple[str, int | None]] = []
        for line in sec.records:
            rr = _REC_RE.match(line)
            if rr:
                u = rr.group(3)
                records.append((rr.group(2), None if u is None else _micro_of(u)))
        out.append(ParsedItem(sec.menu, tuple(records), dictionary))
    return out


def _micro_of(text: str) -> int:
    neg = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    m = int(whole) * 1_000_000 + int(frac)
    return -m if neg else m


def micro_array(values: Sequence[int | None]) -> np.ndarray:
    """Micro-unit utilities as floats (NaN for masked), the form the reference rules use."""
    return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
