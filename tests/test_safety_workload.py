"""The closed-form work counts behind the refusals agree with enumerating the blocks and with simulating."""
from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tfa_sim.sim.simulation import simulate
from tfa_sim.spec.blocks import make_blocks
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import build_config
from tfa_sim.spec.workload import floor_sum, instruction_groups, selected_tiles
from tfa_sim.stages.plan import kernel_plan


@given(st.integers(0, 60), st.integers(1, 40), st.integers(0, 80), st.integers(0, 80))
def test_floor_sum_is_the_sum(n, m, a, b):
    assert floor_sum(n, m, a, b) == sum((a * i + b) // m for i in range(n))


@st.composite
def small_configs(draw):
    """Legal small configs, causal or not, with batch and heads."""
    cube_s1 = draw(st.sampled_from([32, 64, 128]))
    tile_s1 = cube_s1 * draw(st.sampled_from([1, 2, 4]))
    cube_s0 = draw(st.sampled_from([64, 128]))
    data = {"case": {"s0": cube_s0 * draw(st.integers(1, 6)), "s1": tile_s1 * draw(st.integers(1, 6)),
                     "causal": draw(st.booleans()), "batch": draw(st.integers(1, 2)), "heads": draw(st.integers(1, 3))},
            "tiling": {"cube_s0": cube_s0, "cube_s1": cube_s1, "tile_s1": tile_s1},
            "schedule": {"qk_preload": 1 if tile_s1 == cube_s1 else 2}, "numerics": {"enabled": False}}
    try:
        return build_config(data)
    except InputError:
        return None


spans = st.tuples(st.integers(-3, 40), st.integers(-3, 40)).map(sorted)


@settings(max_examples=200, deadline=None)
@given(small_configs(), spans, spans)
def test_selected_tiles_count_what_the_blocks_issue(config, block_span, tile_span):
    assume(config is not None)
    want = sum(1 for b in make_blocks(config) if block_span[0] <= b.index < block_span[1]
               for t in range(b.tiles) if tile_span[0] <= t < tile_span[1])
    assert selected_tiles(config, tuple(block_span), tuple(tile_span)) == want


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_configs())
def test_instruction_groups_bound_what_the_simulation_executes(config):
    assume(config is not None)
    sim = simulate(kernel_plan(config, load_hardware(config.hardware)), None, log_events=True)
    executed = len(sim.stats.events)
    assert executed <= instruction_groups(config) <= 2 * executed
