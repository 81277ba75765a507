"""``_Model.of``: the one way a typed row becomes a view."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from skillopt_sleep.results import PendingProposal


@dataclass
class _Row:
    id: str = "p3"
    target_path: str = "/home/u/CLAUDE.md"
    unrelated: int = 1


def test_of_reads_fields_renamed_and_given_values_win():
    view = PendingProposal.of(_Row(), renamed={"target": "target_path"})
    assert view.id == "p3" and view.target == "/home/u/CLAUDE.md"
    assert PendingProposal.of(_Row(), renamed={"target": "target_path"}, id="p9").id == "p9"


def test_a_misspelt_renamed_field_is_an_error_not_a_silent_default():
    with pytest.raises(TypeError, match="PendingProposal has no field targte"):
        PendingProposal.of(_Row(), renamed={"targte": "target_path"})
