import pytest
from sounding.cli.calls import Arm, CalibrationTarget, ExpansionStrategy, FusionMethod, Role
from sounding.core.expansion import STRATEGIES as EXPANSION_STRATEGIES
from sounding.core.fusion import FUSION_METHODS
from sounding.core.stop_rules import SESSION_STOP_RULES
from sounding.inquiry.domains.bulls_and_cows import POLICIES
from sounding.inquiry.llm.ablations import SESSION_ABLATIONS
from sounding.inquiry.llm.domain import LLM_POLICIES
from sounding.retrieval.strategies import STRATEGIES
from sounding.settings.tokens import ROLES
from sounding_bench.cli.eval_choices import (
    Ablation,
    BullsAndCowsPolicy,
    LongQueries,
    QuestionSelection,
    StopRule,
    ToolConfig,
)
from sounding_bench.retrieval import LONG_QUERIES
from sounding_bench.tools import CONFIGS as TOOL_CONFIGS
from sounding_client._convert import CALIBRATION_TARGETS

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("choices", "accepted"),
    [
        (Arm, list(STRATEGIES)),
        (FusionMethod, list(FUSION_METHODS)),
        (ExpansionStrategy, list(EXPANSION_STRATEGIES)),
        (Role, list(ROLES)),
        (CalibrationTarget, list(CALIBRATION_TARGETS)),
        (StopRule, ["all", *SESSION_STOP_RULES]),
        (BullsAndCowsPolicy, list(POLICIES)),
        (ToolConfig, list(TOOL_CONFIGS)),
        (QuestionSelection, list(LLM_POLICIES)),
        (Ablation, [*SESSION_ABLATIONS, "episode_tau"]),
        (LongQueries, list(LONG_QUERIES)),
    ],
)
def test_the_cli_offers_exactly_the_names_the_service_accepts(choices, accepted):
    assert [c.value for c in choices] == accepted
