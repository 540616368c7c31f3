"""The context policy's one home (``brutus.policy``): the prune modes' table and the plan for a request."""

from __future__ import annotations

import pydantic
import pytest

from brutus import ContextPolicy, ModelLimits
from brutus.cli.replay_commands import POLICIES
from brutus.policy import PRUNE_MODES, Plan, plan_request

LIMITS = ModelLimits(context=100_000, output=20_000)  # usable 80,000; threshold 64,000 at compact_at 0.80


def test_the_cli_offers_every_prune_mode() -> None:
    assert POLICIES == tuple(PRUNE_MODES)


def test_an_unknown_prune_mode_names_the_known_ones() -> None:
    with pytest.raises(pydantic.ValidationError, match="'on-compaction', 'after-turn', 'off', 'cold-cache'"):
        ContextPolicy(prune="sometimes")


@pytest.mark.parametrize(
    ("mode", "over", "turn_ended", "cold", "prunes_in_compaction"),
    [
        ("on-compaction", Plan(False, "auto", False), Plan(False, None, False), Plan(False, None, False), True),
        ("after-turn", Plan(True, "auto", True), Plan(True, None, False), Plan(False, None, False), True),
        ("off", Plan(False, "auto", False), Plan(False, None, False), Plan(False, None, False), False),
        ("cold-cache", Plan(True, "auto", True), Plan(False, None, False), Plan(True, None, False), True),
    ],
)
def test_each_mode_plans_as_the_rules_say(mode: str, over: Plan, turn_ended: Plan, cold: Plan, prunes_in_compaction: bool) -> None:
    policy = ContextPolicy(prune=mode)
    assert plan_request(policy, tokens=64_001, limits=LIMITS) == over
    assert plan_request(policy, tokens=64_001, limits=LIMITS, blocked=True) == over._replace(compact=None)
    assert plan_request(policy, tokens=64_000, limits=LIMITS, turn_ended=True) == turn_ended
    assert plan_request(policy, tokens=64_000, limits=LIMITS, idle_ms=5 * 60_000 + 1) == cold
    assert plan_request(policy, tokens=64_000, limits=LIMITS, idle_ms=5 * 60_000) == Plan(False, None, False)
    assert plan_request(policy, tokens=10**9, limits=ModelLimits(context=0), turn_ended=True) == turn_ended
    assert plan_request(policy, tokens=0, limits=LIMITS, pending=True) == Plan(False, "auto", False)
    assert plan_request(policy, tokens=0, limits=LIMITS, pending=True, overflow=True) == Plan(False, "overflow", False)
    assert policy.compaction_config().prune is prunes_in_compaction
