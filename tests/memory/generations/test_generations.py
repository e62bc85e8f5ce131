"""Mixed embedding generations: the real wordllama embedder (offline, from its wheel) as the declared one and the
hashing embedder as the other generation; indexes read from files, LanceDB and Chroma."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from replaylens.cli._main import cli
from replaylens.errors import ConfigError, InputError
from replaylens.memory.generations import IndexRows, build_mixed_index, check_generations, read_index, write_index
from replaylens.memory.operations import build_operation_example

pytest.importorskip("wordllama")


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return list(build_operation_example(n_streams=4).history.text("task").tolist())


@pytest.fixture(scope="module")
def mixed(texts: list[str]) -> IndexRows:
    return build_mixed_index(texts, "wordllama:256", "hashing:256", share=0.3, source="mixed")


def test_finds_a_30_percent_mixed_index_and_0_on_a_clean_one(texts: list[str], mixed: IndexRows) -> None:
    rep = check_generations(mixed, "wordllama:256")
    assert rep.n_checked == rep.n_records == len(texts) == 320
    assert rep.n_mismatched == 96 and rep.share == pytest.approx(0.3)
    assert rep.example is not None and rep.example["cosine"] < 0.5
    assert rep.line().startswith("MIXED: 96 of 320 checked records (30.0 %)")
    clean = check_generations(build_mixed_index(texts, "wordllama:256", None, share=0.3), "wordllama:256")
    assert clean.clean and clean.n_mismatched == 0 and clean.example is None
    assert clean.line().startswith("CLEAN: 0 of 320 checked records (0.0 %)")


def test_the_flagged_records_are_exactly_the_other_generation(texts: list[str], mixed: IndexRows) -> None:
    from replaylens.memory.stores import embed_checked, make_embedder

    other = embed_checked(make_embedder("hashing:256"), texts, unit=True)
    from_other = np.isclose(np.einsum("ij,ij->i", mixed.vectors, other), 1.0, atol=1e-4)
    assert int(from_other.sum()) == 96
    declared_hashing = check_generations(mixed, "hashing:256")
    assert declared_hashing.n_mismatched == 320 - 96   # from the other side, the rest is the odd generation


def test_a_sample_estimates_the_share_with_an_interval(mixed: IndexRows) -> None:
    rep = check_generations(mixed, "wordllama:256", sample=120, seed=3)
    assert rep.n_checked == 120 and rep.interval[0] < 0.3 < rep.interval[1]
    assert rep == check_generations(mixed, "wordllama:256", sample=120, seed=3)   # seeded
    assert "a sample of 120 of 320; 95 % interval" in rep.line()


def test_a_dimension_mismatch_flags_every_record(mixed: IndexRows) -> None:
    rep = check_generations(mixed, "hashing:64")
    assert rep.n_mismatched == rep.n_checked and "stored vectors have 256 dimensions, the embedder 64" in rep.line()


def test_index_file_roundtrip_and_errors(tmp_path: Path, mixed: IndexRows) -> None:
    p = write_index(mixed, tmp_path / "index.jsonl")
    back = read_index(p)
    assert back.ids == mixed.ids and check_generations(back, "wordllama:256").n_mismatched == 96
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "text": "x", "vector": [1, 2]}\n{"id": "b", "text": "y", "vector": [1]}\n')
    with pytest.raises(InputError, match=r"bad.jsonl:2: field 'vector': expected 2 numbers"):
        read_index(bad)
    bad.write_text('{"id": "a", "text": "x", "vec": [1, 2]}\n')
    with pytest.raises(InputError, match="field 'vec': unknown field"):
        read_index(bad)


def test_reads_a_lancedb_table_and_a_chroma_collection(tmp_path: Path, mixed: IndexRows) -> None:
    lancedb = pytest.importorskip("lancedb")
    db = lancedb.connect(str(tmp_path / "lance"))
    db.create_table("memories", data=[{"id": i, "text": t, "vector": v.tolist()}
                                      for i, t, v in zip(mixed.ids, mixed.texts, mixed.vectors, strict=True)])
    rep = check_generations(read_index(f"lancedb:{tmp_path / 'lance'}"), "wordllama:256")
    assert rep.n_mismatched == 96
    chromadb = pytest.importorskip("chromadb")
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path=str(tmp_path / "chroma"), settings=Settings(anonymized_telemetry=False))
    coll = client.create_collection("memories", embedding_function=None)
    coll.add(ids=list(mixed.ids), embeddings=mixed.vectors, documents=list(mixed.texts))
    rep = check_generations(read_index(f"chroma:{tmp_path / 'chroma'}:memories"), "wordllama:256")
    assert rep.n_mismatched == 96 and rep.n_records == 320
    with pytest.raises(ConfigError, match="name the table"):
        db.create_table("other", data=[{"id": "x", "text": "y", "vector": [0.0] * 4}])
        read_index(f"lancedb:{tmp_path / 'lance'}")


def test_check_store_cli(tmp_path: Path, mixed: IndexRows) -> None:
    res = CliRunner().invoke(cli, ["check-store", "--demo"])
    assert res.exit_code == 0 and res.output.startswith("MIXED: 192 of 640 checked records (30.0 %)")
    p = write_index(mixed, tmp_path / "i.jsonl")
    res = CliRunner().invoke(cli, ["check-store", "--index", str(p), "--expect-clean", "--json"])
    assert res.exit_code == 1 and "expectation failed: 96 of 320 records" in res.output
    out = json.loads(res.output[: res.output.rindex("}") + 1])
    assert out["mismatched"] == 96 and out["packages"]["wordllama"]
    clean = write_index(build_mixed_index(list(mixed.texts), "wordllama:256", None, share=0), tmp_path / "c.jsonl")
    res = CliRunner().invoke(cli, ["check-store", "--index", str(clean), "--expect-clean"])
    assert res.exit_code == 0 and res.output.startswith("CLEAN")
    res = CliRunner().invoke(cli, ["check-store"])
    assert res.exit_code == 2 and "needs --index" in res.output
