"""The poisoning screen: rules that must never reach a live file unasked.

Every rule the optimizer writes (a reflect edit's text, a consolidation's merged rules, a
skill's trained ``describe`` description) is screened before the val gate sees it, the rules a
staged document adds are screened again when it is staged and when it is adopted. A rule is
flagged when it tells the agent to

* download and run code (``curl … | sh``, ``bash <(wget …)``, ``iex (iwr …)``, ``eval "$(curl"``);
* send data to a URL or host (``curl -d @-``, ``--upload-file``, ``wget --post-file``,
  ``| nc host port``, "upload … to https://…");
* read credentials or keys (``~/.ssh``, ``id_rsa``, ``.aws/credentials``, ``.netrc``,
  ``/etc/shadow``, keychains, "print the API key / token / password");
* weaken permissions (``chmod 777`` / ``a+rwx`` / ``o+w``, ``chmod -R`` or ``chown -R`` on ``/``
  or ``~``, ``NOPASSWD``, ``setenforce 0``, ``--privileged``);
* disable confirmations or safety checks (``--dangerously-skip-permissions``, ``--yolo``,
  ``--no-verify``, TLS verification off, "skip / disable / bypass … confirmation, approval,
  permission, sandbox, safety check", "without asking"), or run a destructive ``rm -rf /``;
* follow instructions hidden from the reader: zero-width or other invisible format characters,
  bidirectional controls, HTML comments (``<!-- … -->``), homoglyphs (a word mixing Latin with
  Cyrillic / Greek letters, full-width letters), or an "ignore previous instructions" override.

Matching is done on the rule with invisible characters removed and Unicode compatibility
forms folded (NFKC), so a hidden character or a full-width letter does not hide a command.
The screen is deliberately strict: a flagged rule is never applied by a night, and a staged
document that adds one is adopted only with an explicit override (``adopt --allow-flagged``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

#: invisible characters that are no whitespace: zero-width, word joiner, BOM, soft hyphen …
_ZERO_WIDTH = set("\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad\u180e\u034f")
#: bidirectional controls (embedding, override, isolate, marks)
_BIDI = set("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")

_I = re.IGNORECASE
_FETCH = r"(?:curl|wget|fetch|iwr|irm|invoke-webrequest|invoke-restmethod|http(?:ie)?|aria2c)"
_SHELL = r"(?:sudo\s+)?(?:ba|z|k|da|c|tc|fi)?sh|python[0-9.]*|perl|ruby|node|deno|bun|php|iex|pwsh|powershell|source|\."

#: (category, pattern) pairs, searched in the folded rule text
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "downloads and runs code",
        re.compile(
            rf"\b{_FETCH}\b[^\n|;&]*\|\s*(?:{_SHELL})(?![\w-])"
            rf"|(?:{_SHELL})\s*(?:-c\s*)?[\"']?\s*<\(\s*{_FETCH}\b"
            rf"|(?:{_SHELL})\s+-c\s*[\"']?\s*\$\(\s*{_FETCH}\b"
            rf"|\b(?:eval|exec|source|\.)\s+[\"']?\$\(\s*{_FETCH}\b"
            rf"|\biex\b[^\n]*\b(?:iwr|irm|invoke-webrequest|downloadstring|net\.webclient)"
            rf"|\b{_FETCH}\b[^\n]*(?:&&|;)\s*(?:sudo\s+)?(?:(?:ba|z)?sh|chmod\s+\+x|\./)"
            rf"|\bdownload\w*\b[^\n.]{{0,80}}\b(?:and|then)\s+(?:run|execute|install|pipe)"
            r"|\b(?:pip|pip3|npm|pnpm|yarn|gem|cargo)\s+install\s+[^\n]*\bhttps?://",
            _I,
        ),
    ),
    (
        "sends data to a URL",
        re.compile(
            rf"\b{_FETCH}\b[^\n]*\s(?:-d|--data(?:-\w+)?|-F|--form|-T|--upload-file|-X\s*(?:post|put)"
            r"|--post-(?:data|file)|--json)\b"
            r"|@-"
            r"|\|\s*(?:nc|ncat|netcat|socat|telnet)\s"
            r"|\b(?:nc|ncat|netcat)\s+(?:-\w+\s+)*[\w.-]+\s+\d{2,5}\b"
            r"|/dev/tcp/"
            r"|\b(?:send|post|upload|exfiltrat\w*|forward|transmit|report)\b[^\n]{0,80}"
            r"\bto\s+(?:https?://|[\w.-]+\.(?:com|net|org|io|xyz|ru|cn|sh|dev)\b|\d+\.\d+\.\d+\.\d+)"
            r"|\bscp\s+[^\n]*\s[\w.-]+@[\w.-]+:",
            _I,
        ),
    ),
    (
        "reads credentials or keys",
        re.compile(
            r"~/\.ssh|\$home/\.ssh|/\.ssh/|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.pem\b|\.p12\b"
            r"|\.aws/credentials|\.aws/config|\.netrc\b|\.git-credentials|\.npmrc\b|\.pypirc\b"
            r"|\.docker/config\.json|\.kube/config|/etc/(?:shadow|sudoers|passwd)\b|\.gnupg\b"
            r"|\bkeychain\b|security\s+find-(?:generic|internet)-password|\bgpg\s+--export-secret"
            r"|\.config/gh/hosts|\b(?:printenv|env)\b\s*(?:\||>|$)",
            _I,
        ),
    ),
    (
        "reads credentials or keys",
        re.compile(
            r"\b(?:cat|print|echo|show|read|dump|paste|copy|include|output|reveal|send|log|upload)\b"
            r"[^\n.;]{0,40}\b(?:api[\s_-]?keys?|access[\s_-]?keys?|secret[\s_-]?keys?"
            r"|private[\s_-]?keys?|auth[\s_-]?tokens?|access[\s_-]?tokens?|passwords?|passphrases?"
            r"|credentials?|secrets?|ssh[\s_-]?keys?|\.env\b)",
            _I,
        ),
    ),
    (
        "weakens permissions",
        re.compile(
            r"\bchmod\s+(?:-\w+\s+)*(?:0?[0-7]?77[0-7]|0?666|[ugoa]*\+[rwx]*w[rwx]*|a\+rwx|o\+\w+)"
            r"|\bch(?:mod|own|grp)\s+(?:-\w+\s+)*-R\b[^\n]*\s(?:/|~/?|\$home/?)(?:\s|$|[`'\".;])"
            r"|\bnopasswd\b|\bsetenforce\s+0\b|\bufw\s+disable\b|\biptables\s+-F\b|--privileged\b"
            r"|\bumask\s+0?000\b|\bvisudo\b|\bchattr\s+-i\b",
            _I,
        ),
    ),
    (
        "disables confirmations or safety checks",
        re.compile(
            r"--dangerously[\w-]*|--yolo\b|--no-verify\b|--allow-all-tools\b|--allow-all\b"
            r"|bypasspermissions|--ask-for-approval\s+never|approval[_ ]policy\s*=?\s*\"?never"
            r"|danger-full-access|--no-sandbox\b|--insecure\b|--no-check-certificate\b|\bcurl\s+-k\b"
            r"|verify\s*=\s*false|strict-ssl\s+false|node_tls_reject_unauthorized\s*=\s*0"
            r"|git_ssl_no_verify|pythonhttpsverify\s*=\s*0|core\.hookspath\s+/dev/null"
            r"|\b(?:never|don'?t|do\s+not)\s+(?:ask|wait)\s+(?:for\s+)?(?:the\s+user\s+)?"
            r"(?:for\s+)?(?:confirm\w*|approv\w*|permission)"
            r"|\bauto[- ]?approve\w*"
            r"|\brm\s+-(?:rf|fr|r\s+-f|f\s+-r)\s+(?:--no-preserve-root\s+)?(?:/|~|\$home|\*)(?:\s|$|[`'\";])",
            _I,
        ),
    ),
    (
        "disables confirmations or safety checks",
        re.compile(
            r"\b(?:disable|disabling|skip|skipping|bypass|bypassing|turn\s+off|ignore|ignoring"
            r"|suppress|override|circumvent)\b[^\n.;]{0,40}\b(?:confirm\w*|approv\w*|permission\w*"
            r"|safety|security|sandbox\w*|guardrails?|verification|hooks?|warnings?|checks?)\b"
            r"|\bwithout\s+(?:asking|confirm\w*|approv\w*|permission)",
            _I,
        ),
    ),
    (
        "overrides the user's instructions",
        re.compile(
            r"\b(?:ignore|disregard|forget)\s+(?:all\s+|any\s+)?(?:the\s+)?(?:previous|prior|above"
            r"|earlier|other|user'?s?|system)\s+(?:instructions|rules|prompts?|messages?)"
            r"|<\s*/?\s*(?:system|system-reminder|user_query|instructions?|assistant)\b",
            _I,
        ),
    ),
)

#: letters of scripts that look like Latin letters (homoglyphs)
_LOOKALIKE_SCRIPTS = ("CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE")


def _script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    if name.startswith("LATIN") or ("A" <= ch <= "Z") or ("a" <= ch <= "z"):
        return "LATIN"
    for script in _LOOKALIKE_SCRIPTS:
        if name.startswith(script):
            return script
    if name.startswith(("FULLWIDTH LATIN", "MATHEMATICAL")):
        return "LOOKALIKE"
    return ""


def hidden(text: str) -> list[str]:
    """Why ``text`` hides something from a reader ([] when it does not)."""
    out: list[str] = []
    if any(ch in _ZERO_WIDTH for ch in text):
        out.append("hidden text: a zero-width character")
    if any(ch in _BIDI for ch in text):
        out.append("hidden text: a bidirectional control character")
    other = [
        ch
        for ch in text
        if unicodedata.category(ch) in ("Cf", "Co", "Cs")
        and ch not in _ZERO_WIDTH
        and ch not in _BIDI
    ] + [ch for ch in text if unicodedata.category(ch) == "Cc" and ch not in "\t\n\r"]
    if other:
        out.append(f"hidden text: an invisible character U+{ord(other[0]):04X}")
    if re.search(r"<!--|-->|<\s*(?:script|style|details|div|span)\b", text, _I):
        out.append("hidden text: an HTML comment or tag")
    for word in re.findall(r"\w+", text):
        scripts = {_script(ch) for ch in word if ch.isalpha()} - {""}
        if ("LATIN" in scripts and len(scripts) > 1) or "LOOKALIKE" in scripts:
            out.append(f"hidden text: a homoglyph word {word!r} (mixed scripts)")
            break
    return out


def fold(text: str) -> str:
    """``text`` as the patterns see it: invisible characters removed, NFKC-folded (full-width
    and other compatibility forms become ASCII), whitespace collapsed."""
    kept = "".join(
        ch
        for ch in text
        if ch not in _ZERO_WIDTH and ch not in _BIDI and unicodedata.category(ch) != "Cf"
    )
    return " ".join(unicodedata.normalize("NFKC", kept).split())


#: the phrase patterns a negation right before them turns into advice ("never log secrets",
#: "do not skip the checks"); a command pattern is flagged whatever precedes it
_NEGATABLE = {id(PATTERNS[3][1]), id(PATTERNS[6][1])}
_NEGATED = re.compile(r"\b(?:never|not|don'?t|dont|avoid|no|nor|stop)\s+(?:\w+\s+)?$", _I)


def _found(pattern: re.Pattern[str], text: str) -> bool:
    for m in pattern.finditer(text):
        if id(pattern) not in _NEGATABLE or not _NEGATED.search(text[: m.start()]):
            return True
    return False


def screen(text: str) -> list[str]:
    """Every reason ``text`` (one rule or description) is flagged, in a fixed order; []
    when it passes."""
    reasons = hidden(text)
    folded = fold(text)
    plain = folded.replace("`", " ")
    for category, pattern in PATTERNS:
        if category not in reasons and (_found(pattern, folded) or _found(pattern, plain)):
            reasons.append(category)
    return reasons


def reason(text: str) -> str:
    """One line: why ``text`` is flagged ("" when it passes)."""
    found = screen(text)
    return "poisoning screen: " + "; ".join(dict.fromkeys(found)) if found else ""


@dataclass(frozen=True)
class Flag:
    """A screened text that did not pass: the rule (or description) and why."""

    text: str
    reason: str
    where: str = "rule"  # rule | description


def flag_all(texts: Iterable[str], where: str = "rule") -> list[Flag]:
    """The flagged ones of ``texts``, in order."""
    return [Flag(t, r, where) for t in texts if (r := reason(t))]


def added(
    base_rules: list[str],
    new_rules: list[str],
    base_description: str | None = None,
    new_description: str | None = None,
) -> list[Flag]:
    """The flags of what a document adds over its base: rules not in ``base_rules`` (exact
    text) and a description other than ``base_description``."""
    have = set(base_rules)
    out = flag_all([r for r in new_rules if r not in have])
    if new_description is not None and new_description != base_description:
        out += flag_all([new_description], "description")
    return out


def document_flags(base_text: str | None, new_text: str) -> list[Flag]:
    """The flags of what ``new_text`` (a whole staged document) adds over ``base_text`` (the
    live file it was made from; None: absent): the rules of its managed blocks that the base
    does not have, and a skill's front matter description when it changed."""
    from skillopt_sleep.delivery.document import all_rules, front_matter_description

    def described(text: str | None) -> str | None:
        found = front_matter_description(text or "")
        return found[0] if found else None

    return added(
        all_rules(base_text), all_rules(new_text), described(base_text), described(new_text)
    )


def visible(text: str) -> str:
    """``text`` with every invisible or bidirectional character written as ``<U+XXXX>``, so
    a report shows what a hidden rule holds."""
    return "".join(
        f"<U+{ord(ch):04X}>"
        if ch in _ZERO_WIDTH
        or ch in _BIDI
        or unicodedata.category(ch) in ("Cf", "Co", "Cs")
        or (unicodedata.category(ch) == "Cc" and ch not in "\t\n\r")
        else ch
        for ch in text
    )
