"""Label maps ρ (derangements, involutions, user maps) and slot laws σ (uniform derangement/permutation)."""

from ._batch import stream_perms, vector_draws_match_numpy
from ._labels import (
    DERANGEMENTS_4,
    INVOLUTIONS_4,
    LabelMap,
    all_permutations,
    cyclic_shifts,
    derangements,
    identity,
    parse_map,
    resolve_maps,
)
from ._pcg import seed_state_words, seeded_uniforms
from ._slots import SlotLaw, SlotSpec, draw_block, stream_perm, uniform_derangement, uniform_permutation

__all__ = [
    "DERANGEMENTS_4",
    "INVOLUTIONS_4",
    "LabelMap",
    "SlotLaw",
    "SlotSpec",
    "all_permutations",
    "cyclic_shifts",
    "derangements",
    "draw_block",
    "identity",
    "parse_map",
    "resolve_maps",
    "stream_perm",
    "seed_state_words",
    "seeded_uniforms",
    "stream_perms",
    "vector_draws_match_numpy",
    "uniform_derangement",
    "uniform_permutation",
]
