"""Adopt, reject and roll back staged proposals: the only code that writes a user's live file.

By concern: :mod:`.confinement` (the roots the tool owns, the path checks), :mod:`.records`
(reading proposals), :mod:`.live` (the live-file write, backups), :mod:`.adoption`,
:mod:`.rollback` and :mod:`.refusals` (reject, lift a refusal).
"""

from skillopt_sleep.proposals.adoption import adopt, adopt_group
from skillopt_sleep.proposals.records import (
    ADOPTING,
    agent_group,
    list_proposals,
    load_report,
    report_markdown,
)
from skillopt_sleep.proposals.refusals import lift_refusal, reject
from skillopt_sleep.proposals.rollback import rollback

__all__ = [
    "ADOPTING",
    "adopt",
    "adopt_group",
    "agent_group",
    "lift_refusal",
    "list_proposals",
    "load_report",
    "reject",
    "report_markdown",
    "rollback",
]
