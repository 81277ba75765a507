"""Secret redaction and text sanitising for everything harvested into the store.

:func:`redact` replaces secrets with ``[REDACTED:<kind>]``. It is applied to the *final* text of
every stored field: the harvesters redact each message after joining its parts and before
cutting it, and the store redacts again whatever it writes (message text, a merged message
as a whole, titles, project, model, tool names, the parse state, tasks, rollouts), so a
field no harvester thought of is still covered. Kinds:

* ``private_key`` — PEM ``-----BEGIN … PRIVATE KEY-----`` and PGP ``PRIVATE KEY BLOCK``
  blocks (also cut-off ones);
* provider tokens by their published shape (after the rules gitleaks and detect-secrets
  publish): ``anthropic_key`` (``sk-ant-…``), ``api_key`` (``sk-…``, ``sk-proj-…``),
  ``stripe_key`` (``sk_live_…``, ``rk_…``, ``whsec_…``), ``google_api_key`` (``AIza…``),
  ``google_oauth`` (``GOCSPX-…``, ``ya29.…``), ``github_token``, ``gitlab_token``,
  ``slack_token``, ``slack_webhook``, ``discord_webhook``, ``discord_bot_token``,
  ``telegram_bot_token``, ``aws_access_key_id`` (``AKIA…``/``ASIA…``), ``azure_sas``
  (``sig=``), ``azure_client_secret`` (``…8Q~…``), ``shopify_token`` (``shpat_…``),
  ``digitalocean_token`` (``dop_v1_…``), ``atlassian_token`` (``ATATT…``),
  ``age_secret_key`` (``AGE-SECRET-KEY-1…``), ``vault_token`` (``hvs.…``), ``mailgun_key``
  (``key-…``), ``doppler_token`` (``dp.st.…``), ``huggingface_token``, ``npm_token``,
  ``pypi_token``, ``sendgrid_key`` and the rest of :data:`REDACTION_KINDS` (Databricks,
  Linear, Notion, Postman, Grafana, Sentry, New Relic, Square, PlanetScale, Pulumi,
  Dynatrace, Terraform Cloud, Supabase, Groq, Replicate, Perplexity, xAI, Tailscale,
  Netlify, Docker Hub, Figma, Contentful, RubyGems, Brevo, EasyPost, Mapbox, Alibaba,
  Artifactory, Twilio, Mailchimp, Fly.io, Heroku, LangSmith, Pinecone, 1Password …);
* ``aws_secret_access_key`` (after ``aws_secret_access_key =``/``:``, ``SecretAccessKey``,
  ``aws configure``, a credentials.csv row), ``aws_session_token`` (table form);
* ``jwt`` (three base64url parts starting ``eyJ``), ``bearer_token`` (``Bearer <token>``,
  ``Authorization: token …``), ``basic_auth`` (``curl -u user:pass``, ``Authorization:
  Basic …``), ``cookie`` (session-like cookie values of 16+ characters),
  ``url_credentials`` (``scheme://user:pass@host``, any case, ``@`` allowed in the password);
* ``password`` — ``password=…``, ``"password": "…"``, ``DB_PASSWORD: …``, ``DB_PASS=…`` style
  assignments, ``mysql … -pSECRET``, ``sshpass -p``, ``docker login -p|--password``,
  ``echo X | … --password-stdin``, ``--password X``; prose "the password (for X) is …";
* ``secret`` — generic ``api_key|token|secret|…key|key_data|… = value`` assignments (a quoted
  value cut off before its closing quote still counts; upper-case keys may hold spaces), and
  a high-entropy value (16+ characters with letters and digits, a 12-character run without
  separators, ≥ 3 bits per character; not a path, dotted name or UUID) within a few words
  after ``password``, ``token``, ``secret``, ``credential``, ``key`` ("the deploy token for
  prod is Xq7…").

How it holds: a token's boundary does not depend on what precedes it (``_sk-ant-…_``,
``xghp_…`` are caught; the shapes whose prefix is common — ``sk-``, ``SK``, ``key-``, ``hf_``
… — must have a machine-made body: letters with digits, or mixed case); a ``\n`` / ``\t``
escape written as text (JSON inside text) counts as the break it stands for; a token
hard-wrapped over lines is tried on its joined lines, and the lines after a redacted value
that go on with it (letters with digits, or inner capitals — not a word like ``Done``) are
dropped with it.

Not caught (no recognisable shape): a bare token with no key or prefix (a Twilio auth token in
prose, a 40-character AWS secret on a line of its own), password hashes, a wrapped token whose
tail is a plain lower-case word, a quoted value broken over lines.

Assignments keep their key and separator (``password=[REDACTED:password]``). To leave ordinary
code alone, an unquoted value is not redacted when it is a placeholder (``$VAR``, ``${…}``,
``<…>``, ``***``), a call or subscript expression (``os.environ["X"]``, ``get_pw()``), or — for a
lower-case key — a bare or dotted identifier (``password: str``, ``key: rsa.RSAPrivateKey``). Keys must *end*
with the secret word, so ``max_tokens = 1024`` or ``"input_tokens": 5`` are never touched.

Speed: each pattern runs only when one of its literal triggers occurs in the text, and every
regex is compiled once on first use; ``redact`` is linear in the text. The triggers are found
in one prefilter pass per text (:func:`_present`): an Aho–Corasick automaton (pyahocorasick,
built on first use) over all of them, lower-cased, walks the lower-cased text once, and the
patterns to run follow from the triggers found (no test per pattern).

:func:`sanitize` makes text safe to store: NULs removed, lone surrogates and undecodable bytes
replaced with U+FFFD.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, cast

__all__ = [
    "REDACTION_KINDS",
    "clean",
    "clean_excerpt",
    "decode",
    "redact",
    "redact_json",
    "sanitize",
]


class _Lazy:
    """A regex compiled on first use: importing this module compiles nothing (a harvest
    that finds nothing new redacts nothing). ``pattern`` is the source; the first other
    attribute asked for compiles it and keeps its methods, so later calls cost what the
    compiled pattern's do."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def __getattr__(self, name: str) -> Any:
        compiled = self.__dict__.get("compiled")
        if compiled is None:
            compiled = self.__dict__["compiled"] = re.compile(self.pattern)
            for method in ("sub", "search", "match", "fullmatch", "finditer", "findall", "split"):
                self.__dict__[method] = getattr(compiled, method)
        return getattr(compiled, name)


def _compile(pattern: str) -> re.Pattern[str]:
    """``re.compile(pattern)``, done when the pattern is first used (:class:`_Lazy`)."""
    return cast("re.Pattern[str]", _Lazy(pattern))


_PLACEHOLDER = _compile(
    r"""(?ix)^(?:
        \[REDACTED.* | x{3,} | \*{3,} | \.{3,} | <[^>]*>? | \$.* | \{\{.* | %\(.* | %[A-Za-z_]+%?
        | your[_\- ]?\S* | null | none | nil | true | false | undefined | required | optional
        | redacted | \?+ | -+ | _+
    )$"""
)
#: unquoted values that are code, not secrets: calls/subscripts, or (lower-case keys) identifiers
_CODE_EXPR = _compile(r"[A-Za-z_][\w.]*[(\[].*")
_IDENTIFIER = _compile(r"[A-Za-z_][A-Za-z_.]*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")

_Q = r"""\\?["'`]"""  # an optional backslash-escaped quote (JSON inside text)
_VALUE = (
    r"""(?:\\?"(?P<dq>[^"\\\n\ue000-\ue01f]{1,512})(?:\\?"|$)"""
    r"""|\\?'(?P<sq>[^'\\\n\ue000-\ue01f]{1,512})(?:\\?'|$)"""
    r"""|(?P<bare>[^\s"'`,;:<>{}()\[\]\ue000-\ue01f][^\s"'`,;<>{})\]\ue000-\ue01f]{0,511}))"""
)
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _assignment(words: str) -> re.Pattern[str]:
    # anchored on the secret word (the key must end with it); the key's prefix is read back
    # from the text by the replacer, which is much faster than matching it here
    return _compile(
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
#: the end of every :data:`_GENERIC` key and its separator, lower-cased (each key ends with
#: ``key``, ``key_id``, ``key_data``, ``token``, ``secret`` or ``webhook_url``): the
#: assignment pattern runs only on a text this is found in (see :func:`_lowered`)
_GENERIC_HINT = _compile(
    r"(?:key(?:[_-]?(?:id|data))?|token|secret|webhook[_-]?url)(?:" + _Q + r")?\s{0,3}[=:]"
)

#: escape sequences written as text (``\n`` inside JSON kept as a string): while redacting,
#: the two characters become two private-use characters, so a secret right after ``\n`` starts
#: a token like one after a real line break, and a value never runs on into the next line
_ESCAPE = _compile(r"\\([ntr])")
_MASK = {"n": "\ue010\ue00a", "t": "\ue010\ue009", "r": "\ue010\ue00d"}
_UNMASK = str.maketrans({"\ue010": "\\", "\ue00a": "n", "\ue009": "t", "\ue00d": "r"})
_MASKED = _compile("[\ue000-\ue01f]")
#: a hard-wrapped token: its tail on the next line(s) (checked by :func:`_continues`)
_WRAP = r"(?P<wrap>(?:(?:\r?\n|\ue010\ue00a|\\n)[ \t]{0,16}[A-Za-z0-9+/=_\-]{1,200}(?![A-Za-z0-9+/=_\-]))*)"
_WRAP_PIECE = _compile(
    r"(?:\r?\n|\ue010\ue00a|\\n)[ \t]{0,16}(?P<tok>[A-Za-z0-9+/=_\-]{1,200})(?![A-Za-z0-9+/=_\-])"
)


_DIGITS = frozenset("0123456789")


def _classes(s: str) -> tuple[bool, bool, bool]:
    """Whether ``s`` has a lower-case letter, an upper-case letter, a digit."""
    if s.isascii():  # the same answer in C: only a-z change in upper(), A-Z in lower()
        return s.upper() != s, s.lower() != s, not _DIGITS.isdisjoint(s)
    return (
        any(c.islower() for c in s),
        any(c.isupper() for c in s),
        any(c.isdigit() for c in s),
    )


_ALNUM_RUN = _compile(r"[A-Za-z0-9]{12,}")


def _random(s: str) -> bool:
    """Looks machine-made: a run of 12+ letters and digits (not words joined by ``-``/``_``)
    with letters and digits, or mixed case."""
    for run in _ALNUM_RUN.findall(s):
        lower, upper, digit = _classes(run)
        if (digit and (lower or upper)) or (lower and upper):
            return True
    return False


def _entropy(s: str) -> float:
    """Shannon entropy of ``s`` in bits per character."""
    n = len(s)
    counts: dict[str, int] = {}
    for c in s:
        counts[c] = counts.get(c, 0) + 1
    return -sum(k / n * math.log2(k / n) for k in counts.values())


def _continues(tok: str) -> bool:
    """A line that goes on with a wrapped token's tail (not a word like ``Done``)."""
    lower, upper, digit = _classes(tok)
    if digit and (lower or upper):
        return True
    return lower and upper and _classes(tok[1:])[1]


#: (kind, substrings one of which must occur — ``lower`` ones in the lower-cased text — ,
#: pattern, check). The whole match is replaced, except a ``keep`` group which stays in front
#: of the tag; a ``wrap`` group (a hard-wrapped token's tail) is dropped line by line while it
#: looks like the token's continuation. ``check`` (on the token, without ``keep`` and
#: ``wrap``) must hold for a match to count. Prefix tokens have no boundary before them, so
#: ``_sk-ant-…``, ``xsk-ant-…`` or ``\nsk-ant-…`` are caught like ``sk-ant-…`` (shapes after the
#: patterns that gitleaks and detect-secrets publish).
Check = Callable[[str], bool] | None
_PATTERNS: list[tuple[str, tuple[str, ...], bool, re.Pattern[str], Check]] = []
#: the index in :data:`_PATTERNS` -> its hint (see :func:`_add`)
_HINTS: dict[int, re.Pattern[str]] = {}


def _add(
    kind: str,
    triggers: tuple[str, ...],
    pattern: str,
    check: Check = None,
    *,
    lower: bool = False,
    wrap: bool = True,
    hint: str | None = None,
) -> None:
    """Add a token shape. ``hint``: a pattern every match contains that starts with a literal
    (the pattern itself starts with a character class, so a search for it tries every
    position of that class): the pattern runs only on a text the hint is found in."""
    compiled = _compile(pattern + (_WRAP if wrap else ""))
    if hint is not None:
        _HINTS[len(_PATTERNS)] = _compile(hint)
    _PATTERNS.append((kind, triggers, lower, compiled, check))


_add(
    "private_key",
    ("PRIVATE KEY",),
    r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"(?:[A-Za-z0-9+/=\s\\:,.\-\ue000-\ue01f]{16,20000}?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
    r"|(?:\\n|\s|[A-Za-z0-9+/=:.,\- \ue000-\ue01f])*?[A-Za-z0-9+/=]{16,}[A-Za-z0-9+/=\s\\\ue000-\ue01f]*)",
    wrap=False,
)
_add("anthropic_key", ("sk-ant-",), r"sk-ant-[A-Za-z0-9_\-]{20,}")
_add("api_key", ("sk-",), r"sk-(?=[A-Za-z_\-]*\d)[A-Za-z0-9_\-]{20,}", _random)
_add("stripe_key", ("_live_", "_test_"), r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}", _random)
_add("google_api_key", ("AIza",), r"AIza[0-9A-Za-z_\-]{35}", wrap=False)
_add("google_oauth", ("GOCSPX-",), r"GOCSPX-[A-Za-z0-9_\-]{20,}")
_add("google_oauth", ("ya29.",), r"ya29\.[A-Za-z0-9_\-]{30,}", _random)
_add("google_oauth", ("1//0",), r"1//0[A-Za-z0-9_\-]{30,}", _random)
_add(
    "github_token",
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    r"(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{40,})",
)
_add("slack_token", ("xox", "xapp-"), r"(?:xox[abposre]|xapp)-[A-Za-z0-9\-]{10,}")
_add(
    "aws_access_key_id",
    ("AKIA", "ASIA", "ABIA", "ACCA"),
    r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])",
    wrap=False,
)
_add(
    "gitlab_token",
    ("gl",),
    r"gl(?:pat|ptt|dt|rt|cbt|oas|ft|imt|soat|ffct|agent)-[A-Za-z0-9_\-]{20,}",
)
_add("huggingface_token", ("hf_", "api_org_"), r"(?:hf_|api_org_)[A-Za-z0-9]{30,}", _random)
_add("npm_token", ("npm_",), r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", wrap=False)
_add("pypi_token", ("pypi-",), r"pypi-AgE[A-Za-z0-9_\-]{50,}")
_add(
    "slack_webhook",
    ("hooks.slack.com",),
    r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]{20,}",
)
_add("stripe_key", ("whsec_",), r"whsec_[A-Za-z0-9+/=]{20,}")
_add("sendgrid_key", ("SG.",), r"SG\.[\w-]{16,}\.[\w-]{16,}", _random)
_add(
    "discord_webhook",
    ("/api/webhooks/",),
    r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[\w-]{20,}",
)
# the shapes an adversarial trial found missing, and more that scanners publish
_add("azure_sas", ("sig=",), r"(?P<keep>(?i:sig)=)[A-Za-z0-9%+/]{20,}(?:=|%3[dD]){0,2}", lower=True)
_add(
    "discord_bot_token",
    (".",),
    r"[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38}",
    _random,
    hint=r"\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27}",
)
_add("shopify_token", ("shp",), r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}")
_add("digitalocean_token", ("_v1_",), r"do[opr]_v1_[a-f0-9]{64}")
_add(
    "telegram_bot_token",
    (":",),
    r"[0-9]{8,10}:[A-Za-z0-9_\-]{35}(?![A-Za-z0-9\-])",
    _random,
    wrap=False,
    hint=r":[A-Za-z0-9_\-]{35}",
)
_add("atlassian_token", ("ATATT", "ATCTT"), r"AT[AC]TT[A-Za-z0-9_\-=]{20,}")
_add("age_secret_key", ("AGE-SECRET-KEY-",), r"AGE-SECRET-KEY-1[0-9A-Z]{20,}")
_add("vault_token", ("hvs.", "hvb.", "hvr."), r"hv[sbr]\.[A-Za-z0-9_\-]{20,}", _random)
_add("mailgun_key", ("key-",), r"key-[0-9a-z]{32}(?![0-9a-zA-Z])", _random, wrap=False)
_add("doppler_token", ("dp.",), r"dp\.(?:st|pt|ct|sa|scim|audit)\.[A-Za-z0-9_\-.]{20,}", _random)
_add("databricks_token", ("dapi",), r"dapi[a-f0-9]{32}(?:-\d)?", _random)
_add("linear_key", ("lin_api_",), r"lin_api_[A-Za-z0-9]{40}")
_add(
    "notion_token", ("secret_", "ntn_"), r"(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,})", _random
)
_add("postman_key", ("PMAK-",), r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}")
_add(
    "grafana_token",
    ("glsa_", "glc_"),
    r"(?:glsa_[A-Za-z0-9]{32}_[a-fA-F0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,2})",
)
_add("sentry_token", ("sntrys_", "sntryu_"), r"sntry[su]_[A-Za-z0-9+/=_\-]{40,}")
_add("newrelic_key", ("NRAK-", "NRII-", "NRJS-"), r"NR(?:AK|II|JS)-[A-Za-z0-9]{20,}")
_add(
    "square_token",
    ("sq0", "EAAA"),
    r"(?:sq0(?:atp|csp)-[A-Za-z0-9_\-]{22,}|EAAA[A-Za-z0-9_\-+=]{60,})",
    _random,
)
_add("planetscale_token", ("pscale_",), r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_\-.=]{32,}")
_add("pulumi_token", ("pul-",), r"pul-[a-f0-9]{40}", _random)
_add("dynatrace_token", ("dt0c01.",), r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}")
_add("terraform_token", (".atlasv1.",), r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=\-]{60,}")
_add("supabase_token", ("sbp_",), r"sbp_[a-f0-9]{40}")
_add("groq_key", ("gsk_",), r"gsk_[A-Za-z0-9]{48,}")
_add("replicate_token", ("r8_",), r"r8_[A-Za-z0-9]{37}", _random)
_add("perplexity_key", ("pplx-",), r"pplx-[A-Za-z0-9]{40,}", _random)
_add("xai_key", ("xai-",), r"xai-[A-Za-z0-9]{60,}", _random)
_add("tailscale_key", ("tskey-",), r"tskey-[a-z]+-[A-Za-z0-9]{6,}-[A-Za-z0-9]{16,}")
_add("netlify_token", ("nfp_",), r"nfp_[A-Za-z0-9]{36,}")
_add("buildkite_token", ("bkua_",), r"bkua_[a-f0-9]{40}")
_add("figma_token", ("figd_",), r"figd_[A-Za-z0-9_\-]{40,}")
_add("docker_hub_token", ("dckr_pat_",), r"dckr_pat_[A-Za-z0-9_\-]{27,}")
_add("rubygems_key", ("rubygems_",), r"rubygems_[a-f0-9]{48}")
_add("clojars_token", ("CLOJARS_",), r"CLOJARS_[a-z0-9]{60}")
_add("brevo_key", ("xkeysib-",), r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}")
_add("contentful_token", ("CFPAT-",), r"CFPAT-[A-Za-z0-9_\-]{43}")
_add("sourcegraph_token", ("sgp_",), r"sgp_[A-Za-z0-9_]{40,}", _random)
_add("typeform_token", ("tfp_",), r"tfp_[A-Za-z0-9_\-.=]{44,}", _random)
_add("prefect_key", ("pnu_",), r"pnu_[A-Za-z0-9]{36}", _random)
_add("readme_key", ("rdme_",), r"rdme_[a-z0-9]{70}")
_add("flutterwave_key", ("FLWSECK",), r"FLWSECK(?:_TEST)?-[a-h0-9]{32}-X")
_add("duffel_token", ("duffel_",), r"duffel_(?:test|live)_[A-Za-z0-9_\-=]{43}")
_add("easypost_key", ("EZAK", "EZTK"), r"EZ[AT]K[A-Za-z0-9]{54}")
_add("shippo_token", ("shippo_",), r"shippo_(?:live|test)_[a-f0-9]{40}")
_add("mapbox_token", ("sk.eyJ",), r"sk\.eyJ[A-Za-z0-9_\-]{20,}\.[A-Za-z0-9_\-]{20,}")
_add("azure_client_secret", ("Q~",), r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}", wrap=False)
_add("alibaba_key", ("LTAI",), r"LTAI[A-Za-z0-9]{20}(?![A-Za-z0-9])", _random, wrap=False)
_add("facebook_token", ("EAA",), r"EAA[MC][A-Za-z0-9]{100,}", _random)
_add("artifactory_token", ("AKCp",), r"AKCp[A-Za-z0-9]{69}", wrap=False)
_add("twilio_key", ("SK",), r"SK[0-9a-f]{32}(?![0-9a-zA-Z])", _random, wrap=False)
_add("mailchimp_key", ("-us",), r"[0-9a-f]{32}-us[0-9]{1,2}(?![0-9])", _random, wrap=False)
_add("adafruit_key", ("aio_",), r"aio_[A-Za-z0-9]{28}", _random)
_add(
    "flyio_token",
    ("fo1_", "fm1", "fm2_"),
    r"(?:fo1_[A-Za-z0-9_\-]{40,}|fm[12][ar]?_[A-Za-z0-9+/=_\-]{40,})",
)
_add("heroku_key", ("HRKU-",), r"HRKU-[A-Za-z0-9_\-]{40,}")
_add("circleci_token", ("CCIPAT_",), r"CCIPAT_[A-Za-z0-9]{20,}_[a-f0-9]{40}")
_add("deno_token", ("ddp_", "ddw_"), r"dd[pw]_[A-Za-z0-9]{36}", _random)
_add("langsmith_key", ("lsv2_",), r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}")
_add("pinecone_key", ("pcsk_",), r"pcsk_[A-Za-z0-9_]{40,}")
_add("onepassword_token", ("ops_eyJ",), r"ops_eyJ[A-Za-z0-9+/=_\-]{50,}")
_add(
    "onepassword_secret_key",
    ("A3-",),
    r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}",
    wrap=False,
)
_add("nuget_key", ("oy2",), r"oy2[a-z0-9]{43}", _random)
_add(
    "plaid_token",
    ("access-sandbox-", "access-development-", "access-production-"),
    r"access-(?:sandbox|development|production)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    wrap=False,
)
_add(
    "aws_secret_access_key",
    ("aws_secret_access_key",),
    r"(?i)(?P<keep>aws_secret_access_key(?:" + _Q + r")?\s{0,3}[=:]\s{0,3}(?:" + _Q + r")?)"
    r"[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])",
    lower=True,
    wrap=False,
)
_add(
    "aws_secret_access_key",
    ("secretaccesskey", "secret_access_key"),
    r"(?i)(?P<keep>secret_?access_?key(?:" + _Q + r")?\s{0,3}[=:|]\s{0,3}(?:" + _Q + r")?)"
    r"[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])",
    lower=True,
    wrap=False,
)
_add(
    "password",
    ("sshpass", "mysql"),
    r"(?P<keep>sshpass\s+-p\s*['\"]?|mysql(?:dump|admin|import|check|show)?\b[^\n|;&]*?"
    r"\s-p(?!assword))(?!\$)(?=[^\s'\"]*[\d!@#%^&*A-Z])[^\s'\"-][^\s'\"]{2,}",
    lower=True,
    wrap=False,
)
_add(
    "aws_secret_access_key",  # credentials.csv …
    ("akia", "asia"),
    r"(?P<keep>\[REDACTED:aws_access_key_id\]\s*[,;|\t]\s*)[A-Za-z0-9/+=]{40}(?![A-Za-z0-9/+=])",
    lower=True,
    wrap=False,
)
_add(
    "aws_secret_access_key",  # `aws configure`
    ("secret access key",),
    r"(?i)(?P<keep>secret access key(?:\s*\[[^\]\n]*\])?\s*[:=]\s*)[A-Za-z0-9/+=]{16,}",
    lower=True,
    wrap=False,
)
_add(
    "aws_session_token",
    ("sessiontoken", "session_token"),
    r"(?i)(?P<keep>session_?token\s*\|\s*)[A-Za-z0-9/+=]{16,}",
    lower=True,
    wrap=False,
)
_add(
    "password",
    ("docker", "podman", "helm", "buildah", "skopeo", "oras"),
    r"(?P<keep>(?:(?:docker|podman|buildah|skopeo|oras)\s+login|helm\s+registry\s+login)\b"
    r"[^\n|;&]*?\s(?:-p|--password)(?:\s+|=)['\"]?)(?!-)(?!\$)[^\s'\"]{3,}",
    lower=True,
    wrap=False,
)
_add(
    "password",
    ("--pass",),
    r"(?P<keep>\s--pass(?:word)?(?:\s+|=)['\"]?)(?!-)(?!\$)(?![A-Z_]+\b)[^\s'\"]{3,}",
    lower=True,
    wrap=False,
)
_add(
    "password",
    ("--password-stdin",),
    r"(?P<keep>echo\s+['\"]?)[^\s'\"|]{6,}(?=['\"]?\s*\|[^\n]*--password-stdin)",
    lower=True,
    wrap=False,
)
_add(
    "basic_auth",
    ("-u", "--user"),
    r"(?P<keep>(?:curl|wget|http|https)\b[^\n|;&]*?\s(?:-u|--user)(?:\s+|=)['\"]?"
    r"[^\s:'\"]{1,100}:)(?!\$)[^\s'\"]{3,}",
    lower=True,
    wrap=False,
)
_add(
    "basic_auth",
    ("basic",),
    r"(?P<keep>(?i:authorization)\s*:\s*(?i:basic)\s+)[A-Za-z0-9+/=]{8,}",
    lower=True,
)
_add(
    "bearer_token",
    ("authorization",),
    r"(?P<keep>(?i:authorization)\s*:\s*(?i:token|bearer)\s+)(?!\[REDACTED)"
    r"[A-Za-z0-9\-._~+/]{16,}=*",
    lower=True,
)
_add(
    "cookie",
    ("cookie",),
    r"(?P<keep>(?i:set-cookie|cookie)\s*:\s*(?:[^=;\s]+=[^;\s]*;\s*)*?"
    r"(?i:[\w.-]*(?:sess|token|auth|sid)[\w.-]*)=)[^;\s]{16,}",
    lower=True,
    wrap=False,
)
_add("jwt", ("eyJ",), r"eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}")
_add(
    "bearer_token",
    ("bearer",),
    r"(?P<keep>(?i:bearer)\s+)(?=[A-Za-z\-._~+/]*\d)[A-Za-z0-9\-._~+/]{12,}=*",
    lower=True,
)
_add(
    "url_credentials",
    ("://",),
    r"(?P<keep>(?i:[a-z][a-z0-9+.\-]{1,20})://)(?![^\s@]*[${}])[^/\s:@\[\]]{0,100}:"
    r"[^\s\[\]]{1,200}?(?=@[^@/\s\[\]\"'`]+(?:[/\s?#\"'`,;)]|$))",
    wrap=False,
)

_SURROGATE = _compile("[\ud800-\udfff]")


def _sub_token(kind: str, check: Check):
    tag = f"[REDACTED:{kind}]"

    def repl(m: re.Match[str]) -> str:
        groups = m.groupdict()
        keep, wrap = groups.get("keep") or "", groups.get("wrap") or ""
        whole = m.group(0)
        if check is not None and not check(whole[len(keep) : len(whole) - len(wrap)]):
            return whole
        return keep + tag + _unwrapped(wrap)

    return repl


def _unwrapped(wrap: str) -> str:
    """What is left of a ``wrap`` group once the lines that go on with the token are dropped."""
    at = 0
    for piece in _WRAP_PIECE.finditer(wrap):
        if not _continues(piece.group("tok")):
            break
        at = piece.end()
    return wrap[at:]


#: any redacted value (an assignment's, a short token's …) whose tail was wrapped onto the
#: next line(s)
_TAG_WRAP = _compile(r"(?P<tag>\[REDACTED:[a-z_]+\])" + _WRAP)


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
_PASSWORD_PROSE = _compile(
    r"(?P<keep>(?i:\b(?:password|passwd|passphrase|pwd))(?:\s+(?i:for|of|to)\s+[\w.@-]{1,60})?"
    r"(?:\s+(?i:is|was))?\s+)"
    r"(?=\S*[\d!@#$%^&*_+?~])(?![\[(=])[^\s`'\"]{6,}"
)

#: a high-entropy value shortly after a secret word, whatever stands between them ("the
#: deploy token for prod → Xq7…", "key: Xq7…", "secret Xq7…"): see :func:`_high_entropy`.
#: Matched in the lower-cased text (much faster than ``(?i)``), the value read from the text.
_NEAR_WORD = _compile(
    r"(?:password|passwd|passphrase|pwd|token|secret|credential|api[ _-]?key|key)"
    r"[^\n\ue000-\ue01f]{0,32}?[\s:=\"'`>(,]"
    r"(?P<val>[a-z0-9+/_\-.~!@#$%^&*]{16,256}=*)(?![a-z0-9+/=_\-.~!@#$%^&*])"
)
_UUID = _compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_SEPARATORS = _compile(r"[_\-./:]")
_DOTTED = _compile(r"[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+\.?")


def _high_entropy(value: str) -> bool:
    """A secret-like value: 16+ characters with letters and digits, a run of 12+ without
    separators, ≥ 3 bits of entropy per character, and not a path or a dotted name."""
    value = value.rstrip(".")
    if len(value) < 16 or value[0] in "/~." or _DOTTED.fullmatch(value):
        return False
    if _UUID.fullmatch(value) or max(map(len, _SEPARATORS.split(value))) < 12:
        return False  # words joined by separators: ``ephemeral_5m_input_tokens``, a date
    lower, upper, digit = _classes(value)
    if not (digit and (lower or upper)) or _PLACEHOLDER.match(value):
        return False
    return _entropy(value) >= 3.0


def _near_word(text: str) -> str:
    low = text.lower()
    if len(low) != len(text):  # a character whose lower case is longer: keep the offsets
        low = "".join(c.lower() if len(c.lower()) == 1 else "?" for c in text)
    out: list[str] = []
    at = 0
    for m in _NEAR_WORD.finditer(low):
        start, end = m.span("val")
        if _high_entropy(text[start:end]):
            out += [text[at:start], "[REDACTED:secret]"]
            at = end
    return "".join(out) + text[at:] if out else text


def _regex(
    pattern: re.Pattern[str],
    repl: Callable[[re.Match[str]], str],
    hint: re.Pattern[str] | None = None,
) -> Callable[[str], str]:
    if hint is None:
        return lambda text: pattern.sub(repl, text)
    return lambda text: pattern.sub(repl, text) if hint.search(text) else text


def _lowered(
    pattern: re.Pattern[str],
    repl: Callable[[re.Match[str]], str],
    hint: re.Pattern[str] | None = None,
) -> Callable[[str], str]:
    """``pattern.sub(repl, text)`` for a ``(?i)`` pattern, found in the lower-cased text (a
    case-insensitive scan is several times slower) and matched again on the text itself.
    ``hint``: a pattern every match's lower case contains (see :func:`_add`), searched for
    first in the lower-cased text."""
    fast = _compile(pattern.pattern.removeprefix("(?i)"))

    def run(text: str) -> str:
        low = text.lower()
        if hint is not None and hint.search(low) is None:
            return text
        if len(low) != len(text):
            return pattern.sub(repl, text)
        out: list[str] = []
        at = 0
        for found in fast.finditer(low):
            m = pattern.match(text, found.start())
            if m is None or m.start() < at:
                continue
            out += [text[at : m.start()], repl(m)]
            at = m.end()
        return "".join(out) + text[at:] if out else text

    return run


#: (substrings one of which must occur, whether in the lower-cased text, the replacement)
_REPLACERS: list[tuple[tuple[str, ...], bool, Callable[[str], str]]] = [
    (trig, low, _regex(p, _sub_token(kind, check), _HINTS.get(i)))
    for i, (kind, trig, low, p, check) in enumerate(_PATTERNS)
] + [
    (("pass",), True, _lowered(_PASSWORD, _sub_assignment("password", 3, True))),
    (("pass", "pwd"), True, _regex(_PASSWORD_PROSE, _sub_token("password", None))),
    (
        ("key", "token", "secret", "webhook"),
        True,
        _lowered(_GENERIC, _sub_assignment("secret", 8, False), _GENERIC_HINT),
    ),
    (("pass", "pwd", "key", "token", "secret", "credential"), True, _near_word),
]

#: the literal prefilter: every trigger looked for in one pass per text. ``L`` triggers are
#: looked for in the lower-cased text, ``C`` ones (cased) in the text itself.
_CASED = tuple(sorted({t for trig, low, _ in _REPLACERS if not low for t in trig}))
_LOWER = tuple(sorted({t for trig, low, _ in _REPLACERS if low for t in trig}))
_KEYS = [frozenset(("L" if low else "C") + t for t in trig) for trig, low, _ in _REPLACERS]
#: single characters, found with ``in`` (a match at nearly every line would cost more in the
#: automaton than one ``in`` each)
_CHAR_TRIGGERS = tuple(("C" + t, t) for t in _CASED if len(t) == 1)


def _automaton() -> Any:
    """One Aho–Corasick automaton (pyahocorasick) over every trigger of two or more
    characters, lower-cased: a value per lower-cased trigger, the (key, trigger, cased) of the
    triggers it stands for. A cased trigger found in the lower-cased text is checked again in
    the text (``in``), which is rare: most texts hold none."""
    import ahocorasick

    by_lower: dict[str, list[tuple[str, str, bool]]] = {}
    for t in _LOWER:
        by_lower.setdefault(t, []).append(("L" + t, t, False))
    for t in _CASED:
        if len(t) > 1:
            by_lower.setdefault(t.lower(), []).append(("C" + t, t, True))
    automaton = ahocorasick.Automaton()
    for word, keys in by_lower.items():
        automaton.add_word(word, tuple(keys))
    automaton.make_automaton()
    return automaton


#: the automaton, built on first use (:func:`_present`)
_TRIGGERS: list[Any] = []


def _present(text: str) -> set[str]:
    """The keys (``C``/``L`` + trigger) of the triggers in ``text``, found in one pass of
    :func:`_automaton` over the lower-cased text (a cased trigger's lower case is in the
    lower-cased text whenever the trigger is in the text)."""
    if not _TRIGGERS:
        _TRIGGERS.append(_automaton())
    found: set[str] = set()
    for _end, keys in _TRIGGERS[0].iter(text.lower()):
        for key, t, cased in keys:
            if key not in found and (not cased or t in text):
                found.add(key)
    for key, t in _CHAR_TRIGGERS:
        if t in text:
            found.add(key)
    return found


#: trigger (``C``/``L`` + text) -> the indexes of the replacers it triggers
_BY_TRIGGER: dict[str, tuple[int, ...]] = {
    key: tuple(i for i, keys in enumerate(_KEYS) if key in keys) for keys in _KEYS for key in keys
}


def _to_run(present: set[str]) -> list[int]:
    """The indexes (in order) of the replacers one of whose triggers is ``present``."""
    return sorted({i for key in present for i in _BY_TRIGGER[key]})


#: a token hard-wrapped over lines, its first line perhaps too short for the token's shape:
#: the lines are joined (while they look like its continuation) and the token shapes tried on
#: the joined text
_TOKEN_CHARS = r"A-Za-z0-9+/=_\-.:~"
_WRAPPED = _compile(
    rf"(?<![{_TOKEN_CHARS}])[{_TOKEN_CHARS}]{{8,}}"
    rf"(?:(?:\r?\n|\ue010\ue00a)[ \t]{{0,16}}[{_TOKEN_CHARS}]{{2,}}(?![{_TOKEN_CHARS}]))+"
)
_WRAPPED_PIECE = _compile(
    rf"(?:\r?\n|\ue010\ue00a)[ \t]{{0,16}}(?P<tok>[{_TOKEN_CHARS}]{{2,}})(?![{_TOKEN_CHARS}])"
)
_N_TOKEN_REPLACERS = len(_PATTERNS)


def _tokens(text: str) -> str:
    for i in _to_run(_present(text)):
        if i >= _N_TOKEN_REPLACERS:
            break
        text = _REPLACERS[i][2](text)
    return text


#: the first line break of every :data:`_WRAPPED` match whose first continuation line could
#: go on with the token (:func:`_continues` needs a digit, or a capital after its first
#: character): 8 token characters before the break (a lookbehind after the break's first
#: character, so the search runs from line break to line break), then the piece. A text
#: without one has nothing for :func:`_join_wrapped` to join.
_WRAPPED_HINT = _compile(
    rf"(?:\n(?<=[{_TOKEN_CHARS}]{{8}}\n)|\r\n(?<=[{_TOKEN_CHARS}]{{8}}\r\n)"
    rf"|\ue010\ue00a(?<=[{_TOKEN_CHARS}]{{8}}\ue010\ue00a))[ \t]{{0,16}}"
    rf"(?=[{_TOKEN_CHARS}]{{2}})(?:[{_TOKEN_CHARS}]*?[0-9]|[{_TOKEN_CHARS}]+?[A-Z])"
)


def _join_wrapped(m: re.Match[str]) -> str:
    whole = m.group(0)
    first = _WRAPPED_PIECE.search(whole)
    if first is None or not _continues(first.group("tok")):
        return whole
    pieces = list(_WRAPPED_PIECE.finditer(whole, first.start()))
    joined, at = whole[: pieces[0].start()], pieces[0].start()
    for piece in pieces:
        if not _continues(piece.group("tok")):
            break
        joined += piece.group("tok")
        at = piece.end()
    if at == pieces[0].start():
        return whole
    red = _tokens(joined)
    return whole if red == joined else red + whole[at:]


REDACTION_KINDS = tuple(dict.fromkeys([k for k, *_ in _PATTERNS] + ["password", "secret"]))


#: texts :func:`redact` returned lately (redaction is idempotent, so these are returned at
#: once: the store redacts again what a harvester has just redacted), up to a total size
_DONE: dict[str, None] = {}
_DONE_CHARS = [0]
_DONE_MAX_CHARS = 4_000_000


def redact(text: str) -> str:
    """Return ``text`` with every secret replaced by ``[REDACTED:<kind>]`` (see module doc)."""
    if not text or text in _DONE:
        return text
    out = _redact(text)
    if _DONE_CHARS[0] + len(out) > _DONE_MAX_CHARS:
        _DONE.clear()
        _DONE_CHARS[0] = 0
    _DONE[out] = None
    _DONE_CHARS[0] += len(out)
    return out


def _redact(text: str) -> str:
    masked = "\\" in text and _ESCAPE.search(text) is not None and not _MASKED.search(text)
    if masked:
        text = _ESCAPE.sub(lambda m: _MASK[m.group(1)], text)
    if ("\n" in text or masked) and _WRAPPED_HINT.search(text):
        text = _WRAPPED.sub(_join_wrapped, text)
    # the triggers found before any replacement (may go stale as values are replaced: only a
    # superset matters)
    for i in _to_run(_present(text)):
        text = _REPLACERS[i][2](text)
    if "[REDACTED:" in text:
        text = _TAG_WRAP.sub(lambda m: m.group("tag") + _unwrapped(m.group("wrap") or ""), text)
    return text.translate(_UNMASK) if masked else text


def redact_json(value: Any) -> Any:
    """``value`` (decoded JSON: dicts, lists, strings …) with every string, key or value,
    :func:`redact`-ed; other values as they are."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_json(v) for v in value]
    return value


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
