"""Canary secrets: fake but shape-correct secrets of every kind the redactor claims, made
fresh (from a seeded generator) by the test that uses them, and the agent logs that carry
them in every placement each agent's log has.

A :class:`Canary` is the text to write (``text``: the secret with whatever key, command or
URL it needs) and its ``secret`` part, the random characters that must never be stored. Each
secret is written plainly and in the shapes a trial found leaking: glued to ``_`` or a letter
(``_sk-ant-…_``), right after a ``\\n`` written as text (JSON inside text), and hard-wrapped
over two lines.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

MARK = "canaryword"  # a word every carrier text holds, so one search finds them all


@dataclass(frozen=True)
class Canary:
    name: str
    text: str
    secret: str
    wrap: bool = True  # the hard-wrapped placement applies

    def windows(self, size: int = 12) -> list[str]:
        """The secret and every ``size``-character piece of it: none may be stored."""
        s = self.secret
        return [s] + [s[i : i + size] for i in range(max(1, len(s) - size + 1))]


class Maker:
    """Random parts with letters of both cases and digits (so no part is a word)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def chars(self, n: int, alphabet: str, must: tuple[str, ...] = ()) -> str:
        out = [self.rng.choice(alphabet) for _ in range(n)]
        for i, group in enumerate(must[:n]):
            out[self.rng.randrange(n) if i >= 3 else i * (n // 3)] = self.rng.choice(group)
        return "".join(out)

    def an(self, n: int) -> str:
        return self.chars(
            n,
            string.ascii_letters + string.digits,
            (string.ascii_uppercase, string.ascii_lowercase, string.digits),
        )

    def up(self, n: int) -> str:
        return self.chars(
            n, string.ascii_uppercase + string.digits, (string.ascii_uppercase, string.digits)
        )

    def low(self, n: int) -> str:
        return self.chars(
            n, string.ascii_lowercase + string.digits, (string.ascii_lowercase, string.digits)
        )

    def hex(self, n: int) -> str:
        return self.chars(n, "0123456789abcdef", ("abcdef", "0123456789"))

    def digits(self, n: int) -> str:
        return self.chars(n, "123456789")

    def b64(self, n: int) -> str:
        return base64.b64encode(self.rng.randbytes(n)).decode()

    def password(self, n: int) -> str:
        return self.an(n - 3) + self.rng.choice("!#%") + self.an(2)


def canaries(seed: int = 13) -> list[Canary]:
    """≥ 60 secret shapes: every kind :mod:`skillopt_sleep.redact` documents, the 12 shapes
    a trial found unrecognised, and the other token shapes scanners publish."""
    m = Maker(seed)
    out: list[Canary] = []

    def tok(name: str, prefix: str, body: str, suffix: str = "", wrap: bool = True) -> None:
        out.append(Canary(name, prefix + body + suffix, body, wrap))

    def ctx(name: str, before: str, secret: str, after: str = "", wrap: bool = True) -> None:
        out.append(Canary(name, before + secret + after, secret, wrap))

    tok("anthropic", "sk-ant-api03-", m.an(86) + "-" + m.an(6), "AA")
    tok("openai_project", "sk-proj-", m.an(64) + "T3BlbkFJ" + m.an(64))
    tok("openai_legacy", "sk-", m.an(48))
    tok("stripe_live", "sk_live_", m.an(40))
    tok("stripe_restricted", "rk_live_", m.an(40))
    tok("stripe_webhook", "whsec_", m.an(32))
    tok("google_api_key", "AIza", m.an(35))
    tok("google_oauth_secret", "GOCSPX-", m.an(28))
    tok("google_access_token", "ya29.", m.an(80))
    tok("github_classic", "ghp_", m.an(36))
    tok("github_oauth", "gho_", m.an(36))
    tok("github_app", "ghs_", m.an(36))
    tok("github_fine_grained", "github_pat_11", m.up(22) + "_" + m.an(59))
    tok("slack_bot", "xoxb-" + m.digits(11) + "-" + m.digits(12) + "-", m.an(24))
    tok("slack_app", "xapp-1-A" + m.up(10) + "-" + m.digits(13) + "-", m.hex(64))
    tok("aws_access_key_id", "AKIA", m.up(16))
    tok("aws_temp_key_id", "ASIA", m.up(16))
    tok("gitlab", "glpat-", m.an(20))
    tok("huggingface", "hf_", m.an(34))
    tok("npm", "npm_", m.an(36))
    tok("pypi", "pypi-AgEIcHlwaS5vcmc", m.an(70))
    tok(
        "slack_webhook",
        "https://hooks.slack.com/services/T" + m.up(8) + "/B" + m.up(8) + "/",
        m.an(24),
    )
    tok("sendgrid", "SG." + m.an(22) + ".", m.an(43))
    tok("discord_webhook", "https://discord.com/api/webhooks/" + m.digits(18) + "/", m.an(68))
    tok(
        "azure_sas",
        "https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&ss=b&sp=r&sig=",
        m.an(43),
        "%3D&se=2030-01-01",
    )
    out.append(Canary("discord_bot", (b := "M" + m.an(23) + "." + m.an(6) + "." + m.an(38)), b))
    tok("shopify", "shpat_", m.hex(32))
    tok("digitalocean", "dop_v1_", m.hex(64))
    tok("telegram_bot", m.digits(10) + ":AA", m.an(33))
    tok("atlassian", "ATATT3xFfGF0", m.an(170) + "=" + m.up(8))
    tok("age", "AGE-SECRET-KEY-1", m.up(58))
    tok("vault", "hvs.", m.an(90))
    tok("mailgun", "key-", m.low(32), wrap=False)  # a lower-case tail reads as a word
    tok("doppler", "dp.st.prd.", m.an(40))
    tok("databricks", "dapi", m.hex(32))
    tok("linear", "lin_api_", m.an(40))
    tok("notion", "ntn_", m.an(46))
    tok("postman", "PMAK-" + m.hex(24) + "-", m.hex(34))
    tok("grafana", "glsa_", m.an(32), "_" + m.hex(8))
    tok("sentry", "sntrys_", m.an(80))
    tok("newrelic", "NRAK-", m.up(27))
    tok("square", "sq0csp-", m.an(43))
    tok("planetscale", "pscale_tkn_", m.an(43))
    tok("pulumi", "pul-", m.hex(40))
    tok("dynatrace", "dt0c01." + m.up(24) + ".", m.up(64))
    tok("terraform", m.an(14) + ".atlasv1.", m.an(67))
    tok("supabase", "sbp_", m.hex(40))
    tok("groq", "gsk_", m.an(52))
    tok("replicate", "r8_", m.an(37))
    tok("perplexity", "pplx-", m.an(48))
    tok("xai", "xai-", m.an(80))
    tok("tailscale", "tskey-auth-" + m.an(11) + "-", m.an(30))
    tok("netlify", "nfp_", m.an(40))
    tok("docker_hub", "dckr_pat_", m.an(27))
    tok("figma", "figd_", m.an(40))
    tok("contentful", "CFPAT-", m.an(43))
    tok("rubygems", "rubygems_", m.hex(48))
    tok("brevo", "xkeysib-" + m.hex(64) + "-", m.an(16))
    tok("easypost", "EZAK", m.an(54))
    tok("mapbox", "sk.eyJ1Ijoi" + m.an(20) + ".", m.an(22))
    tok("azure_client_secret", m.an(3) + "8Q~", m.an(34))
    tok("alibaba", "LTAI", m.an(20))
    tok("artifactory", "AKCp", m.an(69))
    tok("twilio", "SK", m.hex(32))
    tok("mailchimp", "", m.hex(32), "-us21")
    tok("flyio", "fo1_", m.an(43))
    tok("heroku", "HRKU-", m.an(60))
    tok("langsmith", "lsv2_pt_", m.hex(32), "_" + m.hex(10))
    tok("pinecone", "pcsk_", m.an(60))
    tok("onepassword_service", "ops_eyJ", m.an(200))
    tok("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJ" + m.an(40) + ".", m.an(43))
    body = "\n".join(m.b64(48) for _ in range(6))
    ctx(
        "rsa_private_key",
        "-----BEGIN RSA PRIVATE KEY-----\n",
        body,
        "\n-----END RSA PRIVATE KEY-----",
        wrap=False,  # already over several lines
    )
    ctx(
        "openssh_private_key",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA",
        m.an(70),
        "\n-----END OPENSSH PRIVATE KEY-----",
    )
    ctx("env_password", "DB_PASSWORD=", m.password(20))
    # a quoted value is not followed over a line break
    ctx("json_password", '{"user": "deploy", "password": "', m.password(18), '"}', wrap=False)
    ctx("aws_secret", "aws_secret_access_key = ", m.an(40))
    ctx("bearer", "Authorization: Bearer ", m.an(40))
    ctx("basic", "Authorization: Basic ", m.b64(30))
    ctx("url_credentials", "postgres://admin:", m.password(20), "@db.internal:5432/app")
    ctx("mysql", "mysql -u root -p", m.password(16), " appdb")
    ctx("curl_user", "curl -u admin:", m.password(16), " https://ci.example.com")
    ctx("docker_login", "docker login -u me -p ", m.password(16), " registry.example.com")
    ctx("cookie", "Cookie: sessionid=", m.an(32))
    ctx("generic_api_key", "api_key = ", m.an(32))
    ctx("token_near_word", "the deploy token for prod is ", m.an(32))
    ctx("password_prose", "my password is ", m.password(14))
    return out


def placements(c: Canary) -> str:
    """The canary in every textual shape: plain, glued to ``_`` and to a letter, after a
    ``\\n`` written as text, and (one-token secrets) hard-wrapped over two lines."""
    lines = [
        f"{MARK} plain {c.text} end",
        f"glued _{c.text}_ and x{c.text}",
        f"escaped \\n{c.text}\\nnext",
    ]
    if c.wrap:
        cut = len(c.text) - max(8, len(c.secret) // 3)
        lines.append(f"wrapped {c.text[:cut]}\n{c.text[cut:]}\nDone")
    return "\n".join(lines)


def split_inside(text: str, c: Canary) -> tuple[str, str]:
    """``text`` cut in two inside the first occurrence of the canary's secret (a streamed
    answer's parts)."""
    at = text.index(c.secret) + len(c.secret) // 2
    return text[:at], text[at:]


# ---------------------------------------------------------------------- agent logs
Writer = Callable[[Path, Canary, int], Path]


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    return path


def write_claude(home: Path, c: Canary, n: int) -> Path:
    """Claude Code: prompt, an answer in two records of one message (cut inside the secret),
    a tool call whose input and result carry it, a custom title, the cwd."""
    sid = str(uuid.uuid4())
    cwd = f"/home/dev/{c.text}"
    env = {"isSidechain": False, "userType": "external", "cwd": cwd, "sessionId": sid}
    env |= {"version": "2.1.40", "gitBranch": "main"}
    text = placements(c)
    head, tail = split_inside(text, c)

    def rec(kind: str, message: dict, i: int) -> dict:
        ts = f"2026-01-05T10:00:{i:02d}.000Z"
        return {**env, "type": kind, "message": message, "uuid": f"u{n}-{i}", "timestamp": ts}

    def answer(blocks: list[dict], i: int) -> dict:
        msg = {"id": f"msg_{n}", "model": "claude-sonnet-4-5", "role": "assistant"}
        return rec("assistant", {**msg, "type": "message", "content": blocks}, i)

    tool_input = {"command": f"echo {c.text}", "description": text}
    records = [
        {"type": "custom-title", "customTitle": f"fix {c.text}", "sessionId": sid},
        rec("user", {"role": "user", "content": f"please check this:\n{text}"}, 1),
        answer([{"type": "text", "text": head}], 2),
        answer([{"type": "text", "text": tail}], 3),
        answer([{"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": tool_input}], 4),
        rec(
            "user",
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": text}],
            },
            5,
        ),
    ]
    slug = f"-home-dev-proj{n}"
    return _jsonl(home / ".claude" / "projects" / slug / f"{sid}.jsonl", records)


def write_codex(home: Path, c: Canary, n: int) -> Path:
    """Codex: prompt (item and event), answer (item and event), a function call's arguments
    and output, the thread name, the cwd."""
    sid = str(uuid.uuid4())
    text = placements(c)

    def cx(kind: str, payload: dict, i: int) -> dict:
        return {"timestamp": f"2026-01-05T10:00:{i:02d}.000Z", "type": kind, "payload": payload}

    args = json.dumps({"cmd": ["bash", "-lc", f"echo {c.text}"], "note": text})
    records = [
        cx(
            "session_meta",
            {
                "id": sid,
                "timestamp": "2026-01-05T10:00:00.000Z",
                "cwd": f"/home/dev/{c.text}",
                "originator": "codex_cli_rs",
                "cli_version": "0.104.0",
                "source": "cli",
                "model_provider": "openai",
            },
            0,
        ),
        cx("turn_context", {"cwd": "/home/dev/proj", "model": "gpt-5.3-codex"}, 1),
        cx(
            "response_item",
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]},
            2,
        ),
        cx("event_msg", {"type": "user_message", "message": text, "images": []}, 2),
        cx("event_msg", {"type": "thread_name_updated", "thread_name": f"fix {c.text}"}, 3),
        cx(
            "response_item",
            {"type": "function_call", "name": "shell", "arguments": args, "call_id": f"c{n}"},
            4,
        ),
        cx(
            "response_item",
            {"type": "function_call_output", "call_id": f"c{n}", "output": text},
            5,
        ),
        cx(
            "response_item",
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"done:\n{text}"}],
            },
            6,
        ),
        cx("event_msg", {"type": "agent_message", "message": f"done:\n{text}"}, 6),
    ]
    path = home / ".codex" / "sessions" / "2026" / "01" / "05"
    return _jsonl(path / f"rollout-2026-01-05T10-00-00-{sid}.jsonl", records)


def write_copilot_cli(home: Path, c: Canary, n: int) -> Path:
    """Copilot CLI: prompt, answer with a tool request whose arguments carry the secret, dict
    tool results (one whose secret straddles character 800, where they were once cut before
    redaction) and a plain one, the cwd."""
    sid = str(uuid.uuid4())
    text = placements(c)
    events: list[dict] = []

    def ev(kind: str, data: dict) -> None:
        i = len(events)
        events.append(
            {
                "type": kind,
                "data": data,
                "id": f"e{n}-{i}",
                "timestamp": f"2026-01-05T10:00:{i:02d}.000Z",
                "parentId": None,
            }
        )

    ev(
        "session.start",
        {
            "sessionId": sid,
            "version": 1,
            "producer": "copilot-agent",
            "copilotVersion": "1.0.102",
            "startTime": "2026-01-05T10:00:00.000Z",
            "context": {"cwd": f"/home/dev/{c.text}"},
        },
    )
    ev("user.message", {"content": text, "transformedContent": text, "messageId": f"m{n}"})
    ev(
        "assistant.message",
        {
            "messageId": f"a{n}",
            "content": f"running:\n{text}",
            "toolRequests": [
                {"toolCallId": f"t{n}", "name": "bash", "arguments": {"command": text}}
            ],
        },
    )
    for k, result in enumerate(
        [
            {"content": {"stdout": text, "exit": 0}},  # a dict result, stored as JSON text
            # the secret straddling character 800, where results were once cut unredacted
            {"content": {"stdout": "x" * (788 - c.text.index(c.secret)) + " " + text}},
        ]
    ):
        ev(
            "tool.execution_complete",
            {"toolCallId": f"t{n}-{k}", "success": True, "result": result},
        )
    ev("tool.execution_complete", {"toolCallId": f"u{n}", "success": True, "result": text})
    return _jsonl(home / ".copilot" / "session-state" / sid / "events.jsonl", events)


def write_copilot_vscode(home: Path, c: Canary, n: int) -> Path:
    """VS Code Copilot Chat (incremental JSONL): prompt, an answer streamed in parts (cut
    inside the secret), a tool invocation, ``customTitle`` (in the full state and set later),
    the workspace folder."""
    sid = str(uuid.uuid4())
    text = placements(c)
    head, tail = split_inside(text, c)
    ws = home / ".config" / "Code" / "User" / "workspaceStorage" / f"ws{n:04d}"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "workspace.json").write_text(
        json.dumps({"folder": "file:///home/dev/" + quote(c.text)}), "utf-8"
    )
    req = {
        "requestId": f"request_{n}",
        "message": {"text": text},
        "timestamp": 1767607200000,
        "modelId": "copilot/gpt-4.1",
        "response": [],
    }
    records = [
        {
            "kind": 0,
            "v": {
                "version": 3,
                "sessionId": sid,
                "creationDate": 1767607200000,
                "customTitle": f"fix {c.text}",
                "requests": [],
            },
        },
        {"kind": 2, "k": ["requests"], "v": [req]},
        {"kind": 2, "k": ["requests", 0, "response"], "v": [{"value": head}]},
        {
            "kind": 2,
            "k": ["requests", 0, "response"],
            "v": [{"kind": "markdownContent", "content": {"value": tail}}],
        },
        {
            "kind": 2,
            "k": ["requests", 0, "response"],
            "v": [{"kind": "toolInvocationSerialized", "toolId": "run_in_terminal"}],
        },
        {"kind": 1, "k": ["customTitle"], "v": f"renamed {c.text} x{c.text}"},
    ]
    return _jsonl(ws / "chatSessions" / f"{sid}.jsonl", records)


def write_cursor(home: Path, c: Canary, n: int) -> Path:
    """Cursor: the prompt inside ``<user_query>``, an answer with a tool call whose input
    carries the secret, a tool result (its lines name no folder, title or model)."""
    tid = f"t{n:04d}-{uuid.uuid4().hex[:8]}"
    text = placements(c)
    blocks = [
        {"type": "text", "text": f"done:\n{text}"},
        {"type": "tool_use", "name": "Shell", "input": {"command": text}},
    ]
    records = [
        {
            "role": "user",
            "message": {
                "content": [{"type": "text", "text": f"<user_query>\n{text}\n</user_query>"}]
            },
        },
        {"role": "assistant", "message": {"content": blocks}},
        {"role": "user", "message": {"content": [{"type": "tool_result", "content": text}]}},
    ]
    slug = f"home-dev-proj{n}"  # log file paths are kept as they are (the tool re-reads them)
    path = home / ".cursor" / "projects" / slug / "agent-transcripts" / tid / f"{tid}.jsonl"
    return _jsonl(path, records)


def write_devin(home: Path, c: Canary, n: int) -> Path:
    """Devin (ATIF JSON): prompt, an answer with a tool call, the call's observation, the
    title and the cwd."""
    sid = f"devin-{n:04d}{uuid.uuid4().hex[:8]}"
    text = placements(c)
    steps = [
        {"step_id": 1, "timestamp": "2026-01-05T10:00:00.000Z", "source": "user", "message": text},
        {
            "step_id": 2,
            "timestamp": "2026-01-05T10:00:01.000Z",
            "source": "agent",
            "message": f"done:\n{text}",
            "tool_calls": [{"function_name": "exec", "arguments": {"command": text}}],
            "observation": {"results": [{"content": text}]},
        },
    ]
    doc = {
        "schema_version": "ATIF-v1.7",
        "session_id": sid,
        "title": f"fix {c.text}",
        "agent": {
            "name": "devin",
            "version": "3000.3.27",
            "model_name": "swe-1-7",
            "extra": {"cwd": f"/home/dev/{c.text}"},
        },
        "steps": steps,
    }
    path = home / ".local" / "share" / "devin" / "cli" / "transcripts" / f"{sid}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), "utf-8")
    return path


def write_opencode(home: Path, c: Canary, n: int) -> Path:
    """OpenCode (JSON storage tree): prompt, an answer in two text parts (cut inside the
    secret), a tool part whose input and output carry it, the title and the directory."""
    sid = f"ses_{n:04d}"
    text = placements(c)
    head, tail = split_inside(text, c)
    old = 1_700_000_000_000 + n * 1000
    storage = home / ".local" / "share" / "opencode" / "storage"
    ses = storage / "session" / "proj" / f"{sid}.json"
    ses.parent.mkdir(parents=True, exist_ok=True)
    ses.write_text(
        json.dumps(
            {
                "id": sid,
                "directory": f"/home/dev/{c.text}",
                "title": f"fix {c.text}",
                "time": {"created": old},
            }
        ),
        "utf-8",
    )
    tool = {
        "type": "tool",
        "id": f"prt_{n}_t",
        "tool": "bash",
        "state": {"status": "completed", "input": {"command": text}, "output": text},
    }
    msgs = [
        (
            {"id": f"msg_{n}_u", "sessionID": sid, "role": "user", "time": {"created": old}},
            [{"type": "text", "text": text}],
        ),
        (
            {
                "id": f"msg_{n}_a",
                "sessionID": sid,
                "role": "assistant",
                "time": {"created": old + 1, "completed": old + 2},
            },
            [{"type": "text", "text": head}, {"type": "text", "text": tail}, tool],
        ),
    ]
    for info, parts in msgs:
        mdir = storage / "message" / sid
        mdir.mkdir(parents=True, exist_ok=True)
        (mdir / f"{info['id']}.json").write_text(json.dumps(info), "utf-8")
        pdir = storage / "part" / info["id"]
        pdir.mkdir(parents=True, exist_ok=True)
        for j, part in enumerate(parts):
            (pdir / f"{j}.json").write_text(json.dumps(part), "utf-8")
    return ses


WRITERS: dict[str, Writer] = {
    "claude_code": write_claude,
    "codex": write_codex,
    "copilot_cli": write_copilot_cli,
    "copilot_vscode": write_copilot_vscode,
    "cursor": write_cursor,
    "devin": write_devin,
    "opencode": write_opencode,
}


# ---------------------------------------------------------------------- scanning
def db_bytes(db: Path) -> bytes:
    """The raw bytes of the database and its WAL / shared-memory files, as they are now."""
    out = b""
    for suffix in ("", "-wal", "-shm", "-journal"):
        p = Path(str(db) + suffix)
        if p.exists():
            out += p.read_bytes()
    return out


def leaks(blob: bytes, cans: list[Canary], size: int = 12) -> list[str]:
    """The canaries any ``size``-character piece of whose secret is in ``blob`` (compared
    lower-cased: the FTS index keeps its tokens so)."""
    owner: dict[bytes, str] = {}
    for c in cans:
        for w in c.windows(size):
            for piece in w.lower().split("\n"):
                for i in range(len(piece) - size + 1):
                    owner.setdefault(piece[i : i + size].encode(), c.name)
    found: dict[str, str] = {}
    for run in re.findall(rb"[^\s\"'\\]{%d,}" % size, blob.lower()):
        for i in range(len(run) - size + 1):
            name = owner.get(run[i : i + size])
            if name and name not in found:
                found[name] = run[i : i + size].decode("utf-8", "replace")
    return [f"{name}: {piece!r}" for name, piece in found.items()]
