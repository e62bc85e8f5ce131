"""Textual bridge: prompt layout, namespaces, padding, schema order, decoding, joint design cells and forms."""

from __future__ import annotations

import json

import numpy as np
import pytest

from replaylens.errors import ConfigError
from replaylens.llm import (
    DECISION_INSTRUCTION,
    Binding,
    ItemDecoder,
    MenuRow,
    PromptItem,
    PromptTemplate,
    ShownRecord,
    decode_response,
    format_utility,
    make_request,
    output_schema,
    parse_prompt,
    render_item,
    render_prompt,
    scripted_tokens,
)
from replaylens.llm._serialize import NAMESPACES
from replaylens.maps import INVOLUTIONS_4
from replaylens.paper.joint import PAPER_ACTIONS, JointBlock, JointDesign

ARMS = tuple(PAPER_ACTIONS)


def _item(records: tuple[ShownRecord, ...], dictionary: tuple[tuple[str, str], ...] | None = None) -> PromptItem:
    menu = tuple(MenuRow(a, d) for a, d in PAPER_ACTIONS.items())
    return PromptItem("breast cancer", "shifted pools", "future", 6, menu, records, dictionary)


def test_item_follows_the_paper_order_and_record_format() -> None:
    recs = (ShownRecord("q", 0.8345121), ShownRecord("r", 0.5), ShownRecord("q", None))
    text = render_item(_item(recs, (("q", "coverage"), ("r", "adaptive"))), PromptTemplate(budget=None))
    order = ["Domain: breast cancer", "Context: shifted pools", "Phase: future, task 07", "- coverage: take",
             "Producer keys: q = coverage, r = adaptive", "Ledger semantics: " + DECISION_INSTRUCTION,
             "Records:", "01 | key=q | utility=0.834512", "02 | key=r | utility=0.500000", "03 | key=q\n",
             "Answer with exactly one action: coverage, adaptive, replicate, or mixed.\nAnswer:"]
    pos = [text.index(s) for s in order]
    assert pos == sorted(pos)
    assert text.endswith("Answer:")
    assert "mean" not in text.lower().replace("measured", "")  # the prompt never names an aggregation


def test_six_decimals_use_the_reference_rounding() -> None:
    assert format_utility(0.1234565) == "0.123456" or format_utility(0.1234565) == "0.123457"
    assert format_utility(1.0) == "1.000000"
    assert format_utility(0.0) == "0.000000"
    assert format_utility(float("nan")) is None
    assert format_utility(0.000001) == "0.000001"


def test_padding_hits_the_budget_exactly_and_hides_the_ledger_length() -> None:
    tpl = PromptTemplate(budget=3000)
    short = render_item(_item((ShownRecord("coverage", 0.5),)), tpl)
    long = render_item(_item(tuple(ShownRecord("replicate", 0.25) for _ in range(24))), tpl)
    answer = "Answer with exactly one action: coverage, adaptive, replicate, or mixed.\nAnswer:"
    for text in (short, long):
        assert len(text) == 3000 + len(answer)
        assert text[:3000].endswith("\n") and text[3000:] == answer
    with pytest.raises(ConfigError, match="budget"):
        render_item(_item(tuple(ShownRecord("replicate", 0.25) for _ in range(200))), tpl)


def test_schema_enum_follows_the_menu_rows_without_sorting() -> None:
    dec = ItemDecoder(("Z", "W", "Y", "X"), {"Z": "coverage", "W": "adaptive", "Y": "replicate", "X": "mixed"})
    schema = output_schema([dec, dec])
    assert schema["properties"]["item_01"]["enum"] == ["Z", "W", "Y", "X"]
    assert schema["required"] == ["item_01", "item_02"] and schema["additionalProperties"] is False
    ok = decode_response(json.dumps({"item_01": "W", "item_02": "X"}), [dec, dec])
    assert ok.ok and ok.actions == ("adaptive", "mixed") and ok.tokens == ("W", "X")
    for bad in ("", "  ", "{", "[]", '{"item_01": "W"}', '{"item_01": "W", "item_02": "Q"}',
                '{"item_01": "W", "item_02": 3}', '{"item_01": "W", "item_02": "X", "extra": "Y"}'):
        assert not decode_response(bad, [dec, dec]).ok, bad


def test_namespaces_bind_tokens_by_vocabulary_index() -> None:
    assert Binding(NAMESPACES["AD"], ARMS).tokens == ("A", "B", "C", "D")
    assert Binding(NAMESPACES["WZ"], ARMS).tokens == ("W", "X", "Y", "Z")
    assert Binding(NAMESPACES["semantic"], ARMS).tokens == ("spread", "focus", "near", "blend")
    op = Binding(NAMESPACES["opaque"], ARMS)
    assert op.tokens == ("q", "r", "s", "t") and op.token("replicate") == "s" and op.label("t") == "mixed"
    assert op.dictionary() == (("q", "coverage"), ("r", "adaptive"), ("s", "replicate"), ("t", "mixed"))
    assert Binding(NAMESPACES["arm"], ARMS).dictionary() is None      # keys are the action names
    assert Binding(NAMESPACES["AD"], ARMS).dictionary() is None       # joint namespaces never show one
    with pytest.raises(ConfigError):
        Binding(NAMESPACES["WZ"], (*ARMS, "fifth")).tokens  # noqa: B018
    assert Binding(NAMESPACES["k"], (*ARMS, "fifth")).tokens == ("K0", "K1", "K2", "K3", "K4")


def test_request_digest_covers_the_exact_bytes_and_the_repeat() -> None:
    tpl = PromptTemplate()
    text = render_prompt([_item((ShownRecord("coverage", 0.5),))], tpl)
    dec = [ItemDecoder(ARMS, {a: a for a in ARMS})]
    a = make_request(text, dec, settings_digest="s", repeat=0)
    assert a.request_id == make_request(text, dec, settings_digest="s", repeat=0).request_id
    assert a.request_id != make_request(text, dec, settings_digest="s", repeat=1).request_id
    assert a.request_id != make_request(text + " ", dec, settings_digest="s", repeat=0).request_id
    assert a.request_id != make_request(text, dec, settings_digest="t", repeat=0).request_id


def test_template_from_file_and_validation(tmp_path) -> None:  # type: ignore[no-untyped-def]
    p = tmp_path / "tpl.json"
    p.write_text(json.dumps({"instruction": "Pick well.", "budget": 2000}))
    tpl = PromptTemplate.from_file(p)
    assert tpl.budget == 2000 and "Ledger semantics: Pick well." in render_item(_item(()), tpl)
    assert tpl.sha256() != PromptTemplate().sha256()
    with pytest.raises(ConfigError):
        PromptTemplate(item="no records here")
    p.write_text(json.dumps({"bogus": 1}))
    with pytest.raises(ConfigError):
        PromptTemplate.from_file(p)


def test_parse_prompt_round_trips_and_scripted_rules_read_the_text() -> None:
    recs = (ShownRecord("q", 0.4), ShownRecord("r", 0.9), ShownRecord("q", 0.7), ShownRecord("r", 0.1))
    items = [_item(recs, (("q", "coverage"), ("r", "adaptive"), ("s", "replicate"), ("t", "mixed"))),
             _item((ShownRecord("mixed", 0.3),))]
    text = render_prompt(items, PromptTemplate())
    parsed = parse_prompt(text)
    assert [p.menu for p in parsed] == [ARMS, ARMS]
    assert parsed[0].records == (("q", 400000), ("r", 900000), ("q", 700000), ("r", 100000))
    assert parsed[0].dictionary["s"] == "replicate"
    # mean: q = 0.55, r = 0.5 -> coverage; sum: r = 1.0 > q = 1.1? no: q sums 1.1 -> coverage; best: r (0.9); latest: r
    assert scripted_tokens(text, "mean") == ["coverage", "mixed"]
    assert scripted_tokens(text, "best") == ["adaptive", "mixed"]
    assert scripted_tokens(text, "latest") == ["adaptive", "mixed"]
    assert scripted_tokens(text, "count") == ["coverage", "mixed"]  # tie 2-2: first appearance
    assert scripted_tokens("no items here", "mean") is None


# ---------------------------------------------------------------------------------------------- joint design

def _blocks(n_streams: int = 6, seed: int = 1) -> tuple[JointBlock, ...]:
    g = np.random.default_rng(seed)
    out = []
    for s in range(n_streams):
        for fam in ("breast_cancer", "wine"):
            for ctx in ("iid", "shift"):
                acts = g.permutation(np.repeat(np.arange(4), 6))
                out.append(JointBlock(f"s{s:02d}", fam, ctx, tuple(int(a) for a in acts),
                                      tuple(float(round(x, 6)) for x in g.uniform(0.4, 0.9, 24))))
    return tuple(out)


def test_joint_design_counts_and_equal_involution_shares() -> None:
    d = JointDesign(_blocks(48), namespaces=("AD", "WZ"), forms=("full",))
    assert d.n_requests == 768
    reqs = d.requests("digest")
    assert len(reqs) == 768 and len({r.request_id for r in reqs}) == 768
    assert all(r.n_items == 4 for r in reqs)
    shares = np.unique([m.name for m in d.omega().values()], return_counts=True)[1]
    assert shares.tolist() == [16, 16, 16]
    assert JointDesign(_blocks(2), forms=("full", "value", "pair", "key_slot", "masked")).n_requests == \
        2 * 2 * 5 * 4 * 2


def test_joint_cells_display_and_decode_through_the_menu_map() -> None:
    d = JointDesign(_blocks(1), namespaces=("AD",), forms=("full",))
    b = d.blocks[0]
    om = INVOLUTIONS_4[0]  # (01)(23)
    for cell in ("00", "01", "10", "11"):
        item, dec = d.item(b, "AD", "full", cell, om)
        lam_h = om.images if cell[0] == "1" else (0, 1, 2, 3)
        lam_a = om.images if cell[1] == "1" else (0, 1, 2, 3)
        assert [r.token for r in item.menu] == ["ABCD"[lam_a[a]] for a in range(4)]  # rows stay semantic
        assert [r.description for r in item.menu] == list(PAPER_ACTIONS.values())
        assert [r.key for r in item.records] == ["ABCD"[lam_h[a]] for a in b.actions]
        assert list(dec.enum) == [r.token for r in item.menu]                        # not re-sorted
        for a in range(4):
            assert dec.decode["ABCD"[lam_a[a]]] == ARMS[a]
        # a scripted rule reading this item: effective assignment λ_A⁻¹ ∘ λ_H
        text = render_prompt([item], d.template)
        tok = scripted_tokens(text, "mean")
        assert tok is not None
        plain = scripted_tokens(render_prompt([d.item(b, "AD", "full", "00", om)[0]], d.template), "mean")
        assert plain is not None
        consistent = cell in ("00", "11")
        assert (dec.decode[tok[0]] == ARMS["ABCD".index(plain[0])]) == consistent


def test_joint_forms_value_and_pair_share_the_utility_sequence() -> None:
    d = JointDesign(_blocks(2))
    for b in d.blocks:
        full, val, pair = d.form_records(b, "full"), d.form_records(b, "value"), d.form_records(b, "pair")
        ks, masked = d.form_records(b, "key_slot"), d.form_records(b, "masked")
        assert [u for _, u in val] == [u for _, u in pair]
        assert [a for a, _ in val] == [a for a, _ in full]
        assert [u for _, u in ks] == [u for _, u in full]
        assert sorted(pair) == sorted(full)                   # pair keeps the multiset of (key, utility) pairs
        assert all(u is None for _, u in masked) and [a for a, _ in masked] == [a for a, _ in full]
        s, k = d.sigmas(b)
        assert not np.any(s == np.arange(24)) and not np.any(k == np.arange(24)) and not np.array_equal(s, k)
    assert JointDesign(_blocks(2)).requests("x")[5].request_id == d.requests("x")[5].request_id  # deterministic
