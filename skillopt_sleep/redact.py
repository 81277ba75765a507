"""Secret redaction and text sanitising for everything harvested into the store.

:func:`redact` replaces secrets with ``[REDACTED:<kind>]``. Kinds:

* ``private_key`` — PEM ``-----BEGIN … PRIVATE KEY-----`` and PGP ``PRIVATE KEY BLOCK``
  blocks (also cut-off ones);
* ``anthropic_key`` (``sk-ant-…``), ``api_key`` (``sk-…``, ``sk-proj-…``), ``stripe_key``
  (``sk_live_…``), ``google_api_key`` (``AIza…``);
* ``github_token`` (``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/``github_pat_``),
  ``slack_token`` (``xoxb-``/``xoxp-``/…);
* ``aws_access_key_id`` (``AKIA…``/``ASIA…``), ``aws_secret_access_key`` (the value after
  ``aws_secret_access_key =``/``:``, or ``SecretAccessKey`` with ``=``/``:``/``|``);
* ``jwt`` (three base64url parts starting ``eyJ``), ``bearer_token`` (``Bearer <token>``,
  ``Authorization: token …``),
  ``url_credentials`` (``scheme://user:pass@host``, any case, ``@`` allowed in the password);
* ``password`` — ``password=…``, ``"password": "…"``, ``DB_PASSWORD: …``, ``DB_PASS=…`` style
  assignments, ``mysql … -pSECRET``, ``sshpass -p``, ``docker login -p|--password``,
  ``echo X | … --password-stdin``, ``--password X``; prose "the password (for X) is …";
* ``basic_auth`` (``curl -u user:pass``, ``Authorization: Basic …``), ``cookie`` (session-like
  cookie values of 16+ characters), ``stripe_key`` also ``whsec_…``, ``sendgrid_key``
  (``SG.….…``), ``discord_webhook``, ``aws_session_token`` (table form);
* ``secret`` — generic ``api_key|token|secret|…key|key_data|… = value`` assignments (a quoted
  value cut off before its closing quote still counts; upper-case keys may hold spaces).

Not caught (no recognisable shape): a bare token with no key or prefix (a Twilio auth token in
prose, a 40-character AWS secret on a line of its own), password hashes.

Assignments keep their key and separator (``password=[REDACTED:password]``). To leave ordinary
code alone, an unquoted value is not redacted when it is a placeholder (``$VAR``, ``${…}``,
``<…>``, ``***``), a call or subscript expression (``os.environ["X"]``, ``get_pw()``), or — for a
lower-case key — a bare or dotted identifier (``password: str``, ``key: rsa.RSAPrivateKey``). Keys must *end*
with the secret word, so ``max_tokens = 1024`` or ``"input_tokens": 5`` are never touched.

:func:`sanitize` makes text safe to store: NULs removed, lone surrogates and undecodable bytes
replaced with U+FFFD. All regexes are compiled once at import; ``redact`` is linear in the text.
"""

from __future__ import annotations

import re

__all__ = ["REDACTION_KINDS", "clean", "clean_excerpt", "decode", "redact", "sanitize"]

_PLACEHOLDER = re.compile(
    r"""(?ix)^(?:
        \[REDACTED.* | x{3,} | \*{3,} | \.{3,} | <[^>]*>? | \$.* | \{\{.* | %\(.* | %[A-Za-z_]+%?
        | your[_\- ]?\S* | null | none | nil | true | false | undefined | required | optional
        | redacted | \?+ | -+ | _+
    )$"""
)
#: unquoted values that are code, not secrets: calls/subscripts, or (lower-case keys) identifiers
_CODE_EXPR = re.compile(r"[A-Za-z_][\w.]*[(\[].*")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_.]*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")

_Q = r"""\\?["'`]"""  # an optional backslash-escaped quote (JSON inside text)
_VALUE = (
    r"""(?:\\?"(?P<dq>[^"\\\n]{1,512})(?:\\?"|$)|\\?'(?P<sq>[^'\\\n]{1,512})(?:\\?'|$)"""
    r"""|(?P<bare>[^\s"'`,;:<>{}()\[\]][^\s"'`,;<>{})\]]{0,511}))"""
)
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _assignment(words: str) -> re.Pattern[str]:
    # anchored on the secret word (the key must end with it); the key's prefix is read back
    # from the text by the replacer, which is much faster than matching it here
    return re.compile(
        r"(?i)(?:" + words + r")(?P<sep>(?:" + _Q + r")?\s{0,3}(?:=|:)\s{0,3})" + _VALUE
    )


_PASSWORD = _assignment(r"password|passwd|passphrase|(?<![a-z])pass")
_GENERIC = _assignment(
    r"api[_-]?key|apikey|access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret"
    r"|auth[_-]?token|access[_-]?token|refresh[_-]?token|api[_-]?token|bearer[_-]?token"
    r"|session[_-]?token|token|secret|account[_-]?key|shared[_-]?access[_-]?key"
    r"|master[_-]?key|signing[_-]?key|encryption[_-]?key|webhook[_-]?url|key[_-]?data"
    r"|private[_-]?key[_-]?id|auth[_-]?key"
)

#: (kind, substrings one of which must occur — ``lower`` ones in the lower-cased text — , pattern).
#: The whole match is replaced, except a ``keep`` group which stays in front of the tag.
_PATTERNS: list[tuple[str, tuple[str, ...], bool, re.Pattern[str]]] = [
    (
        "private_key",
        ("PRIVATE KEY",),
        False,
        re.compile(
            r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            r"(?:[A-Za-z0-9+/=\s\\:,.\-]{16,20000}?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
            r"|(?:\\n|\s|[A-Za-z0-9+/=:.,\- ])*?[A-Za-z0-9+/=]{16,}[A-Za-z0-9+/=\s\\]*)"
        ),
    ),
    ("anthropic_key", ("sk-ant-",), False, re.compile(r"(?<![\w-])sk-ant-[A-Za-z0-9_\-]{20,}")),
    ("api_key", ("sk-",), False, re.compile(r"(?<![\w-])sk-(?=[A-Za-z_\-]*\d)[A-Za-z0-9_\-]{20,}")),
    (
        "stripe_key",
        ("_live_", "_test_"),
        False,
        re.compile(r"(?<![\w-])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ),
    ("google_api_key", ("AIza",), False, re.compile(r"(?<![\w-])AIza[0-9A-Za-z_\-]{35}")),
    (
        "github_token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        False,
        re.compile(r"(?<![\w-])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{40,})"),
    ),
    (
        "slack_token",
        ("xox", "xapp-"),
        False,
        re.compile(r"(?<![\w-])(?:xox[abposr]|xapp)-[A-Za-z0-9\-]{10,}"),
    ),
    (
        "aws_access_key_id",
        ("AKIA", "ASIA"),
        False,
        re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"),
    ),
    (
        "aws_secret_access_key",
        ("aws_secret_access_key",),
        True,
        re.compile(
            r"(?i)(?P<keep>aws_secret_access_key(?:"
            + _Q
            + r")?\s{0,3}[=:]\s{0,3}(?:"
            + _Q
            + r")?)[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])"
        ),
    ),
    (
        "gitlab_token",
        ("glpat-", "glptt-", "gldt-"),
        False,
        re.compile(r"(?<![\w-])gl(?:pat|ptt|dt)-[A-Za-z0-9_\-]{20,}"),
    ),
    ("huggingface_token", ("hf_",), False, re.compile(r"(?<![\w-])hf_[A-Za-z0-9]{30,}")),
    ("npm_token", ("npm_",), False, re.compile(r"(?<![\w-])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])")),
    ("pypi_token", ("pypi-",), False, re.compile(r"(?<![\w-])pypi-AgE[A-Za-z0-9_\-]{50,}")),
    (
        "slack_webhook",
        ("hooks.slack.com",),
        False,
        re.compile(
            r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{20,}"
        ),
    ),
    (
        "aws_secret_access_key",
        ("secretaccesskey", "secret_access_key"),
        True,
        re.compile(
            r"(?i)(?P<keep>secret_?access_?key(?:"
            + _Q
            + r")?\s{0,3}[=:|]\s{0,3}(?:"
            + _Q
            + r")?)[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])"
        ),
    ),
    (
        "password",
        ("sshpass", "mysql"),
        True,
        re.compile(
            r"(?P<keep>\bsshpass\s+-p\s*['\"]?|\bmysql(?:dump|admin|import|check|show)?\b[^\n|;&]*?"
            r"\s-p(?!assword))(?!\$)(?=[^\s'\"]*[\d!@#%^&*A-Z])[^\s'\"-][^\s'\"]{2,}"
        ),
    ),
    ("stripe_key", ("whsec_",), False, re.compile(r"(?<![\w-])whsec_[A-Za-z0-9+/=]{20,}")),
    ("sendgrid_key", ("SG.",), False, re.compile(r"(?<![\w-])SG\.[\w-]{16,}\.[\w-]{16,}")),
    (
        "discord_webhook",
        ("/api/webhooks/",),
        False,
        re.compile(r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[\w-]{20,}"),
    ),
    (
        "aws_secret_access_key",
        ("akia", "asia"),
        True,
        re.compile(  # credentials.csv …
            r"(?P<keep>\[REDACTED:aws_access_key_id\]\s*[,;|\t]\s*)[A-Za-z0-9/+=]{40}"
            r"(?![A-Za-z0-9/+=])"
        ),
    ),
    (
        "aws_secret_access_key",
        ("secret access key",),
        True,
        re.compile(  # `aws configure`
            r"(?i)(?P<keep>secret access key(?:\s*\[[^\]\n]*\])?\s*[:=]\s*)[A-Za-z0-9/+=]{16,}"
        ),
    ),
    (
        "aws_session_token",
        ("sessiontoken", "session_token"),
        True,
        re.compile(r"(?i)(?P<keep>session_?token\s*\|\s*)[A-Za-z0-9/+=]{16,}"),
    ),
    (
        "password",
        ("docker", "podman", "helm", "buildah", "skopeo", "oras"),
        True,
        re.compile(
            r"(?P<keep>\b(?:(?:docker|podman|buildah|skopeo|oras)\s+login|helm\s+registry\s+login)\b"
            r"[^\n|;&]*?\s(?:-p|--password)"
            r"(?:\s+|=)['\"]?)(?!-)(?!\$)[^\s'\"]{3,}"
        ),
    ),
    (
        "password",
        ("--pass",),
        True,
        re.compile(
            r"(?P<keep>\s--pass(?:word)?(?:\s+|=)['\"]?)(?!-)(?!\$)(?![A-Z_]+\b)[^\s'\"]{3,}"
        ),
    ),
    (
        "password",
        ("--password-stdin",),
        True,
        re.compile(r"(?P<keep>\becho\s+['\"]?)[^\s'\"|]{6,}(?=['\"]?\s*\|[^\n]*--password-stdin)"),
    ),
    (
        "basic_auth",
        ("-u", "--user"),
        True,
        re.compile(
            r"(?P<keep>\b(?:curl|wget|http|https)\b[^\n|;&]*?\s(?:-u|--user)(?:\s+|=)['\"]?"
            r"[^\s:'\"]{1,100}:)(?!\$)[^\s'\"]{3,}"
        ),
    ),
    (
        "basic_auth",
        ("basic",),
        True,
        re.compile(r"(?P<keep>(?i:authorization)\s*:\s*(?i:basic)\s+)[A-Za-z0-9+/=]{8,}"),
    ),
    (
        "bearer_token",
        ("authorization",),
        True,
        re.compile(
            r"(?P<keep>(?i:authorization)\s*:\s*(?i:token|bearer)\s+)(?!\[REDACTED)"
            r"[A-Za-z0-9\-._~+/]{16,}=*"
        ),
    ),
    (
        "cookie",
        ("cookie",),
        True,
        re.compile(
            r"(?P<keep>(?i:set-cookie|cookie)\s*:\s*(?:[^=;\s]+=[^;\s]*;\s*)*?"
            r"(?i:[\w.-]*(?:sess|token|auth|sid)[\w.-]*)=)[^;\s]{16,}"
        ),
    ),
    (
        "jwt",
        ("eyJ",),
        False,
        re.compile(r"(?<![\w-])eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}"),
    ),
    (
        "bearer_token",
        ("bearer",),
        True,
        re.compile(r"(?P<keep>(?i:bearer)\s+)(?=[A-Za-z\-._~+/]*\d)[A-Za-z0-9\-._~+/]{12,}=*"),
    ),
    (
        "url_credentials",
        ("://",),
        False,
        re.compile(
            r"(?P<keep>(?i:[a-z][a-z0-9+.\-]{1,20})://)(?![^\s@]*[${}])[^/\s:@\[\]]{0,100}:"
            r"[^\s\[\]]{1,200}?(?=@[^@/\s\[\]\"'`]+(?:[/\s?#\"'`,;)]|$))"
        ),
    ),
]

_SURROGATE = re.compile("[\ud800-\udfff]")

REDACTION_KINDS = tuple(dict.fromkeys([k for k, *_ in _PATTERNS] + ["password", "secret"]))


def _sub_keep(kind: str):
    tag = f"[REDACTED:{kind}]"

    def repl(m: re.Match[str]) -> str:
        keep = m.groupdict().get("keep")
        return (keep or "") + tag

    return repl


def _key_before(m: re.Match[str]) -> str:
    """The whole key an assignment match ends with (its word plus the identifier before it)."""
    text, i = m.string, m.start()
    while i > 0 and m.start() - i < 40 and text[i - 1] in _KEY_CHARS:
        i -= 1
    return text[i : m.start("sep")]


def _sub_assignment(kind: str, min_len: int, allow_spaces: bool):
    tag = f"[REDACTED:{kind}]"

    def repl(m: re.Match[str]) -> str:
        dq, sq, bare = m.group("dq"), m.group("sq"), m.group("bare")
        group = "dq" if dq is not None else "sq" if sq is not None else "bare"
        value = (m.group(group) or "").strip()
        whole = m.group(0)
        if len(value) < min_len or _PLACEHOLDER.match(value):
            return whole
        if bare is not None:
            key = _key_before(m)
            if _CODE_EXPR.fullmatch(bare) or (not key.isupper() and _IDENTIFIER.fullmatch(bare)):
                return whole
        elif not allow_spaces and " " in value and not _key_before(m).isupper():
            return whole  # lower-case keys with prose values ("token: the next token")
        off = m.start()
        return whole[: m.start(group) - off] + tag + whole[m.end(group) - off :]

    return repl


#: "my password is hunter2", "password hunter2secret": prose, no ``=``/``:``. Only values
#: that look like a password (6+ chars with a digit or a symbol) so "password is required"
#: stays readable.
_PASSWORD_PROSE = re.compile(
    r"(?P<keep>(?i:\b(?:password|passwd|passphrase|pwd))(?:\s+(?i:for|of|to)\s+[\w.@-]{1,60})?"
    r"(?:\s+(?i:is|was))?\s+)"
    r"(?=\S*[\d!@#$%^&*_+?~])(?![\[(=])[^\s`'\"]{6,}"
)

_REPLACERS = [(trig, low, p, _sub_keep(kind)) for kind, trig, low, p in _PATTERNS] + [
    (("pass",), True, _PASSWORD, _sub_assignment("password", 3, True)),
    (("pass", "pwd"), True, _PASSWORD_PROSE, _sub_keep("password")),
    (("key", "token", "secret", "webhook"), True, _GENERIC, _sub_assignment("secret", 8, False)),
]


def redact(text: str) -> str:
    """Return ``text`` with every secret replaced by ``[REDACTED:<kind>]`` (see module doc)."""
    if not text:
        return text
    lower = text.lower()
    for triggers, low, pattern, repl in _REPLACERS:
        hay = lower if low else text
        if any(t in hay for t in triggers):
            text = pattern.sub(repl, text)  # ``lower`` may go stale: only a superset matters
    return text


def sanitize(text: str) -> str:
    """Make ``text`` storable: drop NULs, replace lone surrogates with U+FFFD."""
    if not text:
        return text
    if "\x00" in text:
        text = text.replace("\x00", "")
    if not text.isascii():
        text = _SURROGATE.sub("\ufffd", text)
    return text


def decode(raw: bytes) -> str:
    """Decode bytes as UTF-8 (invalid sequences become U+FFFD) and :func:`sanitize` them."""
    return sanitize(raw.decode("utf-8", "replace"))


def clean(text: str) -> str:
    """:func:`sanitize` then :func:`redact`: what every harvested text goes through."""
    return redact(sanitize(text))


def clean_excerpt(text: str, limit: int, window: int | None = None) -> str:
    """The first ``limit`` characters of ``text``, :func:`clean`-ed, with ``…`` when cut.

    A long text is cut *before* redaction (at most ``window`` characters, default 4 × limit),
    and only at whitespace, so a token never straddles the cut: no secret is ever kept in
    part because the rest of it fell outside the window. A window with no whitespace at all
    is dropped whole.
    """
    window = window or 4 * limit
    cut = len(text) > window
    if cut:
        head = text[:window]
        at = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"), head.rfind("\r"))
        text = head[:at] if at > 0 else ""
    out = clean(text)
    return out[:limit] + "…" if cut or len(out) > limit else out
