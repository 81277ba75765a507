"""The issue's measured commit-message case as a Claude Code transcript: the agent runs
``git diff --staged`` and reads the changed file, answers in the past tense and too long, the
user corrects ("no, use the imperative mood and keep it under 50 characters"), the agent
answers "Add retry to fetch client" and the user accepts it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from tests.helpers.sources import CWD, cc_assistant, cc_user, text, write

PROMPT = "write a commit message for the staged changes"
CORRECTION = "no, use the imperative mood and keep it under 50 characters"
CORRECTED = (
    "Added retry logic to the fetch client so that failed requests are retried with "
    "exponential backoff"
)
ACCEPTED = "Add retry to fetch client"
GAMED = "imperative mood"
DIFF = """diff --git a/fetch_client.py b/fetch_client.py
index 3b18e51..a9c2f04 100644
--- a/fetch_client.py
+++ b/fetch_client.py
@@ -1,5 +1,9 @@
+RETRIES = 3
+
 def fetch(url):
-    return http.get(url)
+    for attempt in range(RETRIES):
+        try:
+            return http.get(url)
+        except IOError:
+            continue
"""
SOURCE = "RETRIES = 3\n\ndef fetch(url):\n    for attempt in range(RETRIES):\n"


def _ts(at: dt.datetime, s: int) -> str:
    return (at + dt.timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


#: another day's staged change, for a second occurrence of the same request
OTHER_DIFF = """diff --git a/retry_policy.py b/retry_policy.py
index 1c2d3e4..5f6a7b8 100644
--- a/retry_policy.py
+++ b/retry_policy.py
@@ -1,2 +1,2 @@
-BACKOFF = 1.0
+BACKOFF = 2.5
"""


def write_commit_session(
    root: Path, sid: str, at: dt.datetime, *, tools: bool = True, diff: str = DIFF
) -> Path:
    """Write the session under ``root`` (a Claude Code ``projects`` folder); ``tools=False``:
    the agent's tool calls are logged without their input (a log the capsule cannot use);
    ``diff``: what ``git diff --staged`` printed in it."""
    numbered = "".join(f"{i:6d}→{line}\n" for i, line in enumerate(SOURCE.splitlines(), 1))

    def use(tid: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"type": "tool_use", "id": tid, "name": name, "input": args if tools else {}}

    def result(tid: str, content: str) -> dict[str, Any]:
        return {"type": "tool_result", "tool_use_id": tid, "content": content}

    records = [
        cc_user(f"{sid}-u1", PROMPT, sid=sid, ts=_ts(at, 0)),
        cc_assistant(
            f"{sid}-a1",
            f"{sid}-m1",
            [use(f"{sid}-t1", "Bash", {"command": "git diff --staged"})],
            sid=sid,
            timestamp=_ts(at, 1),
        ),
        cc_user(f"{sid}-r1", [result(f"{sid}-t1", diff)], sid=sid, ts=_ts(at, 2)),
        cc_assistant(
            f"{sid}-a2",
            f"{sid}-m2",
            [use(f"{sid}-t2", "Read", {"file_path": f"{CWD}/fetch_client.py"})],
            sid=sid,
            timestamp=_ts(at, 3),
        ),
        cc_user(f"{sid}-r2", [result(f"{sid}-t2", numbered)], sid=sid, ts=_ts(at, 4)),
        cc_assistant(f"{sid}-a3", f"{sid}-m3", [text(CORRECTED)], sid=sid, timestamp=_ts(at, 5)),
        cc_user(f"{sid}-u2", CORRECTION, sid=sid, ts=_ts(at, 6)),
        cc_assistant(f"{sid}-a4", f"{sid}-m4", [text(ACCEPTED)], sid=sid, timestamp=_ts(at, 7)),
        cc_user(f"{sid}-u3", "perfect, thanks", sid=sid, ts=_ts(at, 8)),
    ]
    return write(root / "-home-dev-proj" / f"{sid}.jsonl", records)
