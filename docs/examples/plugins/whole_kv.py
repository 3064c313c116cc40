"""A value of my own for a design choice: the host puts the whole K and V of the launch into the L2 first.

``kernel.prefetch`` says how many rows of each input (Q, K, V, in memory order) are in the L2 when the launch
starts; the shipped values are the manual build's ``s0_head`` (S0 · HEAD elements) and ``none``. ``whole_kv``
asks what a decode step would gain if the host prefetched its whole KV cache, which a 192 MiB L2 holds only up to
a size: its rule refuses a case whose K and V do not fit.

Load it with ``--plugin whole_kv.py`` (or ``kernel.plugins``) and choose it with ``--set kernel.prefetch=whole_kv``
(docs/guide/extending.md, "A value of a design choice").
"""
from __future__ import annotations

from tfa_sim.api.plugins import register

#: The L2 of a 910B, bytes.
L2_BYTES = 192 << 20


def kv_rows(config) -> int:
    """Every row of K and V: batch · kv_heads · S1."""
    case = config.case
    return case.batch * case.kv_heads * case.s1


def fits_the_l2(config) -> str | None:
    """K and V (fp16 or bf16: 2 bytes an element) must fit in the L2 together."""
    kv_bytes = 2 * kv_rows(config) * config.case.head * 2
    if kv_bytes <= L2_BYTES:
        return None
    return (f"kernel.prefetch = whole_kv needs K and V in the L2: {kv_bytes >> 20} MiB, more than its "
            f"{L2_BYTES >> 20} MiB; use a shorter case.s1 or kernel.prefetch = none")


register("prefetch", "whole_kv", kv_rows,
         doc="every row of K and V (and as many of Q) in the L2 before the launch",
         source="docs/examples/plugins/whole_kv.py (a what-if: the host prefetches the whole KV cache)",
         rules=(fits_the_l2,))
