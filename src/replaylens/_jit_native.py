"""Private: numba-only forms of :mod:`replaylens._jit`'s loop helpers (imported by it once numba is).

:func:`mul_hi64` is the high word of the full 64 x 64-bit product as one machine multiply (LLVM's 128-bit
``mul``), where the plain-Python helper builds it from four 32-bit products: the PCG64 step of every
compiled loop takes three multiplies instead of seven.  The same words either way (tested).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

__all__ = ["mul_hi64"]


@intrinsic
def _umulh(typingctx: Any, a: Any, b: Any) -> Any:
    if a != types.uint64 or b != types.uint64:
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        return builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))

    return types.uint64(types.uint64, types.uint64), codegen


@numba.njit(nogil=True, cache=True, inline="always")
def mul_hi64(a: Any, b: Any) -> Any:
    """``(a * b) >> 64`` of two uint64 (:func:`replaylens._jit.mul_hi64`, compiled)."""
    return _umulh(np.uint64(a), np.uint64(b))  # type: ignore[call-arg]  # (typingctx is numba's)
