"""Subprocess probe for tests/paper/test_numerics.py: hashes of the pinned kernels and of one small fit of each
learned kind, printed as one JSON line (run under REPLAYLENS_PINNED_FITS=1 and a BLAS / dispatch setting)."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from replaylens.paper import numerics as nx
from replaylens.paper.experiments.learned_interface import generator
from replaylens.paper.fitted import (
    FitSettings,
    TrainingBlocks,
    fit_associative,
    fit_interface,
    fit_recurrent,
    haar_orthogonal,
)
from replaylens.paper.learned import (
    TrainSettings,
    make_control_episodes,
    make_sequences,
    train_additive_models,
    train_control_models,
    train_recurrent_models,
)
from replaylens.paper.persistent import PersistentSettings, fit_persistent, fit_selected_only
from replaylens.rng import derive_rng


def h(*arrays: object) -> str:
    d = hashlib.sha256()
    for a in arrays:
        d.update(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes())
    return d.hexdigest()[:16]


def arrays(obj: object) -> list[np.ndarray]:
    return [v for v in vars(obj).values() if isinstance(v, np.ndarray)]


def main() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0.0, s, 30000) for s in (0.01, 1.0, 8.0)])
    out: dict[str, object] = {
        "pinned": nx.is_pinned(),
        "kernels": h(nx.tanh(x), nx.exp(x), nx.expm1(x), nx.sigmoid(x), nx.softplus(x), nx.log1p(np.abs(nx.tanh(x)))),
        "matmul": h(nx.matmul(rng.normal(size=(3, 16, 18)), rng.normal(size=(3, 18, 50))),
                    nx.matmul(rng.normal(size=(12, 700)), rng.normal(size=(700, 16)))),
        "qr_norm2": h(haar_orthogonal(np.random.default_rng(1), 16), nx.norm2(rng.normal(size=(8, 8))))}
    data = make_sequences(32, 1)
    rec = train_recurrent_models([data], [5], TrainSettings(updates=40))[0]
    out["learned-pair recurrent"] = h(*rec.params.values())
    out["learned-pair additive"] = h(*train_additive_models([data], [5], TrainSettings(updates=40))[0].params.values())
    tr, dev = make_control_episodes(16, derive_rng(1, "p")), make_control_episodes(8, derive_rng(2, "p"))
    out["learned-control"] = h(*train_control_models(tr, dev, [3], "augmented", TrainSettings(updates=10))[0]
                               .params.values())
    b = TrainingBlocks(rng.integers(0, 4, (8, 12)), np.round(rng.uniform(size=(8, 12)), 6), 4,
                       np.round(rng.uniform(size=(8, 4)), 6))
    out["fitted associative"] = h(*fit_associative(b, "loo", [11], FitSettings(updates=40))[0].params.values())
    out["fitted recurrent"] = h(*fit_recurrent(b, [5], FitSettings(updates=40))[0].params.values())
    ep = generator().episodes(12, derive_rng(3, "p"))   # the interface substrate: norm2, tanh, exp, matmul
    fi = fit_interface(ep, [7], FitSettings(updates=20))[0]
    out["fitted interface"] = h(*arrays(ep), fi.initial_loss, fi.loss, *fi.params.values())
    arms = ["a", "b", "c", "d"]
    pf = fit_persistent(rng.uniform(size=(3, 2, 8, 4)), rng.uniform(size=(3, 2, 5, 4)), arms=arms,
                        strata=[("x", "low"), ("x", "high")], seed=4, settings=PersistentSettings(epochs=15))
    out["persistent recurrent"] = pf.params.fingerprint
    so = fit_selected_only(rng.integers(0, 4, (6, 12)), rng.uniform(size=(6, 12)), arms=arms, seed=0, steps=30)
    out["selected-only"] = h(so.final_loss, *arrays(so))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
