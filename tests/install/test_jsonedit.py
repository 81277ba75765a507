"""The format-preserving JSON(C) editor behind `install`'s config merges."""

from __future__ import annotations

import json

import pytest

from skillopt_sleep.install.jsonedit import JsonEditError, get_key, loads, remove_key, set_key

SERVER = {"command": "skillopt-sleep", "args": ["mcp"]}
KEYS = ["mcpServers", "skillopt-sleep"]

CASES = {
    "two-space, sibling server": '{\n  "a": 1,\n  "mcpServers": {\n    "x": {"command": "y"}\n  }\n}\n',
    "compact one line": '{"a": 1, "b": [1, 2]}',
    "empty object": "{}",
    "tabs and a line comment": '{\n\t"a": [1, 2] // keep me\n}\n',
    "only a comment": "{\n  // only a comment\n}\n",
    "trailing comma (JSONC)": '{\n  "a": 1, // c\n}\n',
    "empty container": '{\n  "mcpServers": {}\n}\n',
    "block comment, 4 spaces, escapes": '/* head */\n{\n    "z": "\\"q\\\\",\n    "u": "\\u00e9"\n}',
    "CRLF": '{\r\n  "a": 1\r\n}\r\n',
}


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_set_keeps_everything_else_and_is_idempotent(text: str) -> None:
    before = loads(text)
    out = set_key(text, KEYS, SERVER)
    after = loads(out)
    assert after["mcpServers"]["skillopt-sleep"] == SERVER
    after["mcpServers"].pop("skillopt-sleep")
    if "mcpServers" not in before:
        assert after.pop("mcpServers") == {}
    assert after == before
    # every comment survives
    for marker in ("keep me", "only a comment", "head", "// c"):
        assert (marker in text) == (marker in out)
    assert set_key(out, KEYS, SERVER) == out
    assert get_key(out, KEYS) == SERVER


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_remove_takes_out_only_the_member(text: str) -> None:
    out = remove_key(set_key(text, KEYS, SERVER), KEYS)
    data = loads(out)
    assert "skillopt-sleep" not in data.get("mcpServers", {})
    if "mcpServers" in loads(text):
        assert out == text


def test_indentation_follows_the_file() -> None:
    out = set_key('{\n    "a": 1\n}\n', KEYS, SERVER)
    assert '\n    "mcpServers": {\n        "skillopt-sleep": {\n            "command"' in out
    assert set_key('{\n\t"a": 1\n}\n', KEYS, SERVER).count('\n\t\t"skillopt-sleep"') == 1


def test_changed_value_is_replaced_in_place() -> None:
    text = '{\n  "mcpServers": {\n    "skillopt-sleep": {"command": "old"},\n    "z": 1\n  }\n}\n'
    out = set_key(text, KEYS, SERVER)
    assert loads(out)["mcpServers"] == {"skillopt-sleep": SERVER, "z": 1}
    assert out.index("skillopt-sleep") < out.index('"z"')


def test_new_file_and_errors() -> None:
    assert json.loads(set_key(None, KEYS, SERVER)) == {"mcpServers": {"skillopt-sleep": SERVER}}
    with pytest.raises(JsonEditError, match="line 2"):
        set_key('{\n  "a": ,\n}', KEYS, SERVER)
    with pytest.raises(JsonEditError, match="not an object"):
        set_key('{"mcpServers": []}', KEYS, SERVER)
    with pytest.raises(JsonEditError, match="top level"):
        set_key("[1]", KEYS, SERVER)


# JSON5 as OpenClaw reads its openclaw.json (2026.9.6): unquoted keys, single quotes, hex,
# Infinity / NaN, .5 and 5., a + sign, comments and trailing commas
JSON5_CASES = {
    "unquoted keys, single quotes": "{\n  // mine\n  gateway: {port: 0x4a5d, bind: 'loopback'},\n  mcp: {\n    servers: {\n      docs: {command: 'docs-mcp', args: ['--x',],},\n    },\n  },\n}\n",
    "numbers": "{\n  a: +1, b: .5, c: 5., d: Infinity, e: -Infinity, f: 1e3,\n  'q\\'s': \"x\",\n}\n",
    "compact, no mcp": "{agents: {defaults: {workspace: '~/ws'}}}",
    "non-ascii key": "{\n  clé: 1\n}\n",
}
OC_KEYS = ["mcp", "servers", "skillopt-sleep"]


@pytest.mark.parametrize("text", JSON5_CASES.values(), ids=JSON5_CASES.keys())
def test_json5_set_and_remove_keep_every_other_byte(text: str) -> None:
    import json5

    with pytest.raises(JsonEditError):  # not JSON(C): the default dialect refuses it
        set_key(text, OC_KEYS, SERVER)
    out = set_key(text, OC_KEYS, SERVER, json5=True)
    data = json5.loads(out)  # still JSON5 an OpenClaw-compatible reader loads
    assert data["mcp"]["servers"]["skillopt-sleep"] == SERVER
    assert get_key(out, OC_KEYS, json5=True) == SERVER
    assert set_key(out, OC_KEYS, SERVER, json5=True) == out
    assert "// mine" in out or "// mine" not in text
    back = remove_key(out, OC_KEYS, json5=True)
    before = json5.loads(text)
    if "mcp" in before:
        assert back == text  # byte for byte when the containers were there before
    else:
        assert json5.loads(back) == {**before, "mcp": {"servers": {}}}
    assert loads(text, json5=True) == before


def test_json5_errors_name_the_line() -> None:
    with pytest.raises(JsonEditError, match="line 3"):
        set_key("{\n  a: 1,\n  b: 'x\n}\n", OC_KEYS, SERVER, json5=True)
    with pytest.raises(JsonEditError, match="line 2"):
        set_key("{\n  1a: 1\n}\n", OC_KEYS, SERVER, json5=True)
