"""The simulator reads the request an HTTP backend frames as Codex does (issue 26): the
AGENTS.md instructions block and the prompt in one user text. The prompt is what follows the
block, so a rule that names another task ("When writing a commit message: …") does not make
the persona answer the wrong request."""

from __future__ import annotations

from skillopt_sleep import agents
from skillopt_sleep.simulator.wire import parse_chat


def test_the_prompt_after_the_agents_md_block_is_the_request() -> None:
    rules = "- When writing a commit message: keep answers under 50 characters.\n"
    _, prefix = agents.frame_memory("codex", "AGENTS.md", "user", rules)
    body = {
        "model": "sim",
        "messages": [{"role": "user", "content": prefix + "install the dependencies now"}],
    }
    turn = parse_chat(body)
    assert turn.prompt == "install the dependencies now"
    assert "commit message" in turn.rule_text()  # the rules are still read
    # the block alone (as the Codex CLI sends it, its own message) is no prompt
    alone = parse_chat(
        {
            "model": "sim",
            "messages": [
                {"role": "user", "content": prefix},
                {"role": "user", "content": "run the tests"},
            ],
        }
    )
    assert alone.prompt == "run the tests"
