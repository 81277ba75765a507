"""The scope world of the issue-26 tests: a user corrected the length of their commit
messages (three times), asks for Python functions (never corrected) and, in some worlds,
corrected installs to pnpm; a literal-minded simulator persona that obeys every rule it reads
("Keep answers under 50 characters." cuts any answer at 50), a scoped rule only when its scope
names the request."""

from __future__ import annotations

COMMIT = "Add exponential backoff retries to the HTTP client for transient errors"
FUNCTION = (
    "```python\ndef parse_config(path):\n    with open(path) as fh:\n"
    "        return json.load(fh)\n```"
)

#: A literal-minded target: it obeys every rule it reads ("Keep answers under 50 characters."
#: cuts any answer at 50), a scoped rule only when its scope names the request.
PERSONA = f"""
name = "scope-test"
models = []
default_answer = "Sure: {{prompt}}"

[[answers]]
match = "commit message"
text = "{COMMIT}"

[[answers]]
match = "python function"
text = '''{FUNCTION}'''

[[answers]]
match = "install.*dependenc"
text = "Run `npm install` in the project root."

[optimizer]
order = ["derived"]
"""

SHORTER = "no, keep the commit message under 50 characters"
COMMITS = [
    ("claude_code", [("write a commit message for the retry change", COMMIT, SHORTER)]),
    ("codex", [("write a commit message for the backoff change", COMMIT, SHORTER)]),
    ("claude_code", [("write a commit message for the retry fix", COMMIT, SHORTER)]),
]
CODE = [
    ("claude_code", [("write a python function that parses the config file", FUNCTION, None)]),
    ("codex", [("write a python function that parses the config file please", FUNCTION, None)]),
]
PNPM = "no, use pnpm instead of npm"
INSTALLS = [
    ("claude_code", [("install the dependencies", "Run `npm install` in the project root.", PNPM)]),
    (
        "codex",
        [("install the dependencies for me", "Run `npm install` in the project root.", PNPM)],
    ),
    (
        "claude_code",
        [("install the dependencies now", "Run `npm install` in the project root.", PNPM)],
    ),
]
