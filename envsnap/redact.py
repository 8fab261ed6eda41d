"""Secret redaction: names that look secret and values that look like credentials.

A redacted value becomes ``redacted:<8 hex of sha256(value)>`` so that a changed
secret still shows as changed in a diff, while the value itself never reaches a
snapshot, a report or an error message. Every string a collector records goes
through `scrub` (capture/runner.py), and every environment mapping through `redact_env`.

One module on purpose: the secret patterns (one per token format, with sources) and the three contexts
(environment, shell text, file text) are one rule; stdlib only, and the probe copies it as one file.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Iterable, List, Mapping, Optional, Set, Tuple

REDACTED_PREFIX = "redacted:"
_REDACTED_RE = re.compile(r"^redacted:[0-9a-f]{8}$")

# Name parts (split on _ - .; camelCase only for the short words, see _CAMEL_SHORT_WORD)
# that make a variable or argument secret. TOKENIZERS_PARALLELISM must stay visible
# (it changes CPU threads), so TOKEN matches as a whole part only, or as a suffix
# of a part (HFTOKEN), never as a prefix (TOKENIZER).
_SECRET_PARTS = {
    "TOKEN", "TOKENS_SECRET", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASSPHRASE", "PASS",
    "PWD_SECRET", "APIKEY", "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "COOKIE", "COOKIES",
    "PRIVATE", "SESSION", "SIGNATURE", "BEARER", "JWT", "DSN",
    # `sig=` of Azure SAS URLs, `AccountKey=`/`SharedAccessKey=` of Azure connection strings
    "SIG", "ACCOUNTKEY", "SHAREDACCESSKEY", "PRIVKEY", "SECRETKEY", "ACCESSTOKEN", "REFRESHTOKEN",
    # GITHUB_PAT, ADMIN_PW, DB_PASSCODE: the short words people write for a password or a personal token
    "PAT", "PW", "PASSCODE", "PASSPHRASES",
}
_SECRET_PAIRS = {("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY"), ("SECRET", "KEY"),
                 ("SESSION", "KEY"), ("CLIENT", "SECRET"), ("AUTH", "KEY"), ("MASTER", "KEY"),
                 ("ENCRYPTION", "KEY"), ("SIGNING", "KEY"), ("WEBHOOK", "URL"), ("ACCOUNT", "KEY"),
                 ("LICENSE", "KEY")}
_SECRET_SUBSTRINGS = ("PASSWORD", "PASSWD", "SECRET", "APIKEY", "CREDENTIAL", "PRIVATEKEY", "ACCESSKEY",
                      "ACCOUNTKEY")
# `<SERVICE>_KEY` (KAGGLE_KEY, WANDB_KEY, ADMIN_KEY) is a credential unless the part before
# KEY says it is not (a public key, a sort or cache key).
_KEY_NOT_SECRET_BEFORE = {"PUBLIC", "PUB", "SORT", "CACHE", "PARTITION", "PRIMARY", "FOREIGN", "LOOKUP",
                          "DICT", "HASH", "GROUP", "ROUTING", "SHARD", "SEARCH", "INDEX", "MAP", "HOT",
                          "DEDUP", "METRIC", "METRICS", "LABEL", "SEED", "RNG", "KV", "CONFIG",
                          # data-structure keys (envsnap's own "parent_key" of a process entry)
                          "PARENT", "CHILD", "STABLE", "ROLE", "ROOT", "NODE", "SECTION", "FLAT",
                          "JOIN", "MERGE", "MATCH", "UNIQUE", "NATURAL", "COMPOSITE", "ROW", "COLUMN", "TABLE",
                          "REQUEST", "RUN", "BATCH"}
# English words ending in PASS: not a password (CUDA_CACHE_BYPASS, a COMPASS_HEADING).
_PASS_WORDS = {"BYPASS", "COMPASS", "SURPASS", "OVERPASS", "UNDERPASS", "TRESPASS", "ENCOMPASS", "MULTIPASS",
               "SINGLEPASS", "ONEPASS", "TWOPASS", "FIRSTPASS", "SECONDPASS"}
# What follows TOKEN in the name of a setting about text tokens (SGLang's
# speculative_token_map, bucket_inter_token_latency; HF's pad_token_id), not credentials.
_TEXT_TOKEN_NEXT = {"MAP", "LATENCY", "USAGE", "ID", "IDS", "BUDGET", "LIMIT", "COUNT", "NUM", "LEN", "LENGTH",
                    "SIZE", "RATIO", "THRESHOLD", "PER", "THROUGHPUT", "INTERVAL", "INDEX", "POSITION", "STEP",
                    "STEPS", "TIME", "RATE", "BUCKETS", "LEVEL", "LOGPROBS", "PROBS"}
# Names that match the rules above but are known not to be secret and matter for speed,
# or are sockets and ids of the desktop session, not credentials.
_NOT_SECRET = {"PWD", "OLDPWD", "TOKENIZERS_PARALLELISM", "PASSTHROUGH", "SESSION_MANAGER",
               "DBUS_SESSION_BUS_ADDRESS", "XDG_SESSION_ID", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS",
               "XDG_SESSION_DESKTOP", "SSH_AUTH_SOCK", "SSH_AGENT_PID", "GPG_AGENT_INFO",
               # the fields of a passwd entry (pwd.struct_passwd) other than pw_passwd
               "PW_NAME", "PW_DIR", "PW_UID", "PW_GID", "PW_GECOS", "PW_SHELL"}


def is_secret_name(name: str) -> bool:
    """True when a variable/argument/key name looks like it holds a secret."""
    if not isinstance(name, str):
        return False
    return _is_secret_name(name)


# The short words (PW, PAT, PWD) end a camelCase name as a word of their own: adminPw, githubPat. Longer
# words are found inside a camelCase name anyway (apiKey, authToken, clientSecret: _SECRET_SUBSTRINGS, the
# TOKEN suffix), and splitting every camelCase name would make getKey or MatlabSessionLexer secrets.
_CAMEL_SHORT_WORD = re.compile(r"(?<=[a-z0-9])(?:Pw|PW|Pwd|PWD|Pat|PAT)$")


@functools.lru_cache(maxsize=8192)  # a snapshot repeats a few hundred key names thousands of times
def _is_secret_name(name: str) -> bool:
    name = name.strip()
    if _CAMEL_SHORT_WORD.search(name):
        return True  # adminPw, githubPat, dbPwd: camelCase keys of JSON and YAML end with the word
    upper = name.lstrip("-").upper().replace("-", "_").replace(".", "_")
    if not upper or upper in _NOT_SECRET:
        return False
    compact = upper.replace("_", "")
    if any(s in compact for s in _SECRET_SUBSTRINGS):
        return True
    parts = [p for p in upper.split("_") if p]
    for i, part in enumerate(parts):
        if part.endswith("TOKEN") and not part.startswith("TOKENIZ"):
            # A token of text, not of auth: speculative_token_map, inter_token_latency, token_ids.
            if i + 1 < len(parts) and parts[i + 1] in _TEXT_TOKEN_NEXT:
                continue
            return True
        if part in _SECRET_PARTS:
            return True
        if part.endswith("PASS") and part not in _PASS_WORDS:
            return True  # SSHPASS (what `sshpass -e` reads), DBPASS: a password, unless a word (BYPASS)
        if i + 1 < len(parts) and (part, parts[i + 1]) in _SECRET_PAIRS:
            return True
    if len(parts) >= 2:
        # MYSQL_PWD, DB_PWD: a password; PWD alone is the working directory.
        if parts[-1] == "PWD":
            return True
        if parts[-1] == "KEY" and parts[-2] not in _KEY_NOT_SECRET_BEFORE:
            return True
    return False


# A name that is only the word KEY is a credential as a command-line flag (`--key X`), but a stable
# id as a field of envsnap's own records (a process role's "key": "sglang-main") and a sort key in
# code (`sorted(x, key=len)`): only flags use it.
_BARE_SECRET_SETTINGS = {"KEY"}


def is_secret_setting(name: str) -> bool:
    """True when a command-line flag (`--key`, `--db-pw`) looks like it holds a secret."""
    if not isinstance(name, str):
        return False
    if _is_secret_name(name):
        return True
    return name.strip().lstrip("-").upper().replace("-", "_") in _BARE_SECRET_SETTINGS


# PAT is a personal access token in GITHUB_PAT and a regex in URL_PAT = r"[a-z]+": a name secret only
# for its PAT word holds a secret only when the value has no regex syntax (tokens never do).
_PATTERN_SYNTAX = re.compile(r"[\[\](){}|\\^$*?\s]")


def _secret_only_for_pat(name: str) -> bool:
    upper = name.upper()
    if "PAT" not in upper:
        return False
    parts = [p for p in re.split(r"[^A-Z0-9]+", upper) if p]
    return "PAT" in parts and not _is_secret_name("_".join(p if p != "PAT" else "X" for p in parts))


def is_secret_value(name: str, value: str) -> bool:
    """Whether `value`, named `name`, is a secret by its name (is_secret_name, with PAT's exception)."""
    if not is_secret_name(name):
        return False
    return not (_PATTERN_SYNTAX.search(value) and _secret_only_for_pat(name))


def _flag_hides(flag: str, value: str) -> bool:
    """Whether the value of a command-line flag is a secret: `--key X` names a credential (a record's
    "key" an id, see _BARE_SECRET_SETTINGS), but `sort --key 2` a column: a number is no key's value."""
    if is_secret_name(flag):
        return True
    return is_secret_setting(flag) and _NUMBER.match(value) is None


def fingerprint(value: str) -> str:
    """The stand-in for a secret: stable, short, and not the secret."""
    import hashlib  # here: OpenSSL's load is most of this module's import otherwise

    digest = hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{REDACTED_PREFIX}{digest}"


def is_redacted(value: Any) -> bool:
    return isinstance(value, str) and bool(_REDACTED_RE.match(value))


# Credential shapes recognised wherever they appear inside a string. Each is a prefix or
# structure documented by its issuer, so a match is a credential whatever it is named. A prefix
# no word holds (hf_, ghp_, github_pat_, glpat-, xoxb-) is found anywhere, inside an identifier too
# (a trace's kernel gemm_hf_<token>); a shorter one (sk-, npm_, dapi) after anything but a letter or
# digit (task-, disk- are words), so `_` before it (a kernel, a file name) does not hide it.
# Each comes with the literal(s) every match contains: one search for all of those
# (a plain alternation of literals, ~1 us a string) rules out almost every string of a
# snapshot (hashes, paths, versions) before any of the costlier patterns runs.
_SHAPES = [
    # PEM blocks (private keys, certificates with keys): the whole block.
    (("-----BEGIN ",), r"-----BEGIN [A-Z0-9 ]*-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)"),
    # JSON web tokens: three base64url parts, the first a JSON header.
    (("eyJ",), r"eyJ[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]{4,}"),
    (("hf_",), r"hf_[A-Za-z0-9]{16,}"),                       # Hugging Face user tokens
    (("api_org_",), r"api_org_[A-Za-z0-9]{16,}"),             # Hugging Face organisation tokens
    (("sk-",), r"(?<![A-Za-z])sk-(?:ant-|proj-|live-|or-)?[A-Za-z0-9_\-]{16,}"),  # OpenAI / Anthropic / OpenRouter
    (("_live_", "_test_"), r"(?<![A-Za-z0-9])(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),  # Stripe keys
    (("whsec_",), r"(?<![A-Za-z0-9])whsec_[A-Za-z0-9]{16,}"),                  # Stripe webhook secrets
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), r"gh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub tokens
    (("github_pat_",), r"github_pat_[A-Za-z0-9_]{20,}"),
    (("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "glsoat-", "glft-", "glimt-", "glagent-", "gloas-"),
     r"gl(?:pat|dt|rt|ptt|cbt|soat|ft|imt|agent|oas)-[A-Za-z0-9_\-]{16,}"),  # GitLab
    (("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ABIA", "ACCA"),
     r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ABIA|ACCA)[0-9A-Z]{16}(?![0-9A-Z])"),  # AWS access key ids
    (("xox",), r"xox[abposre]-[A-Za-z0-9\-]{10,}"),           # Slack tokens
    (("xapp-",), r"xapp-\d-[A-Za-z0-9\-]{10,}"),              # Slack app tokens
    (("hooks.slack.com/",), r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_\-]+/[A-Za-z0-9_\-]+(?:/[A-Za-z0-9_\-]+)?"),
    (("/api/webhooks/",), r"discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]{10,}"),
    (("AIza",), r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{30,}"),                  # Google API keys
    (("ya29.",), r"(?<![A-Za-z0-9])ya29\.[0-9A-Za-z_\-]{20,}"),               # Google OAuth access tokens
    (("GOCSPX-",), r"(?<![A-Za-z0-9])GOCSPX-[0-9A-Za-z_\-]{20,}"),            # Google OAuth client secrets
    # Azure AD client secrets: 3 chars, a digit, "Q~", then 31-34 chars.
    (("Q~",), r"[A-Za-z0-9_\-.]{3}\dQ~[A-Za-z0-9_\-.~]{31,34}"),
    (("npm_",), r"(?<![A-Za-z0-9])npm_[A-Za-z0-9]{30,}"),                     # npm
    (("pypi-",), r"(?<![A-Za-z0-9])pypi-[A-Za-z0-9_\-]{30,}"),                # PyPI upload tokens
    (("wandb_v1_",), r"wandb_v1_[A-Za-z0-9_\-]{20,}"),
    (("SG.", "sq0atp.", "sq0csp."), r"(?<![A-Za-z0-9])(?:SG|sq0atp|sq0csp)\.[A-Za-z0-9_\-]{16,}(?:\.[A-Za-z0-9_\-]{16,})?"),
    (("r8_",), r"(?<![A-Za-z0-9])r8_[A-Za-z0-9]{30,}"),                       # Replicate
    (("gsk_",), r"(?<![A-Za-z0-9])gsk_[A-Za-z0-9]{40,}"),                     # Groq
    (("pplx-",), r"(?<![A-Za-z0-9])pplx-[A-Za-z0-9]{40,}"),                   # Perplexity
    (("dapi",), r"(?<![A-Za-z0-9])dapi[0-9a-f]{32}(?:-\d+)?(?![0-9a-f])"),              # Databricks
    (("dckr_pat_",), r"dckr_pat_[A-Za-z0-9_\-]{20,}"),        # Docker Hub
    (("hvs.", "hvb.", "hvr."), r"(?<![A-Za-z0-9])hv[sbr]\.[A-Za-z0-9_\-]{20,}"),  # HashiCorp Vault
    (("dop_v1_", "doo_v1_", "dor_v1_"), r"(?<![A-Za-z0-9])do[opr]_v1_[a-f0-9]{64}"),  # DigitalOcean
    (("lsv2_",), r"(?<![A-Za-z0-9])lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}"),  # LangSmith
    (("lin_api_",), r"(?<![A-Za-z0-9])lin_api_[A-Za-z0-9]{30,}"),             # Linear
    (("shpat_", "shpca_", "shppa_", "shpss_"), r"(?<![A-Za-z0-9])shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),  # Shopify
    (("ATATT3",), r"(?<![A-Za-z0-9])ATATT3[A-Za-z0-9_\-]{30,}=*"),             # Atlassian API tokens
    ((":AA",), r"(?<![A-Za-z0-9])\d{8,10}:AA[A-Za-z0-9_\-]{30,}"),            # Telegram bot tokens
    (("AGE-SECRET-KEY-1",), r"(?<![A-Za-z0-9])AGE-SECRET-KEY-1[0-9A-Z]{50,}"),  # age identities
]
# Compiled on first need (the probe loads this module in every worker, and most strings
# never need them); built whole, then bound in one step, so a thread never sees half a list.
_VALUE_PATTERNS: Optional[List["re.Pattern[str]"]] = None


class _OnFirstUse:
    """A regex compiled when first used: the patterns for file text and for named pairs are needed
    only when a capture holds file text (an edited file, a dirty checkout) or a string that may hold
    a credential, and this module is imported by every capture, diff and probed worker (compiling
    them costs ~5 ms each time). The patterns every scrubbed string meets (_PLAIN, _SHAPE_TRIGGER)
    are compiled at import: this indirection would cost more on each of their thousands of calls."""

    __slots__ = ("_pattern", "_flags", "_compiled")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._pattern, self._flags = pattern, flags
        self._compiled: Optional["re.Pattern[str]"] = None

    def __getattr__(self, name: str) -> Any:
        compiled = self._compiled
        if compiled is None:  # two threads may both compile it: the same pattern either way
            compiled = self._compiled = re.compile(self._pattern, self._flags)
        return getattr(compiled, name)


def _on_first_use(pattern: str, flags: int = 0) -> Any:
    return _OnFirstUse(pattern, flags)


def _value_patterns() -> List["re.Pattern[str]"]:
    global _VALUE_PATTERNS
    if _VALUE_PATTERNS is None:
        _VALUE_PATTERNS = [re.compile(regex, re.S) for _, regex in _SHAPES]
    return _VALUE_PATTERNS


_SHAPE_TRIGGER = re.compile("|".join(re.escape(t) for triggers, _ in _SHAPES for t in triggers))
# user:password@ in URLs: only the password part is replaced. The password runs to the
# last '@' of the URL, since passwords hold '@', ':' and '/' themselves (`https://bob:a/b@host/`,
# not URL-encoded, is what people paste). A port and a path before an '@'
# (`git+https://host:8443/org/repo.git@v1.0`) is the one shape that is not a password: _url_part.
_URL_CREDENTIALS = _on_first_use(r"(?P<pre>[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@'\"]*:)(?P<secret>[^\s'\"]+)(?P<post>@)")
_PORT_AND_PATH = re.compile(r"^[0-9]{1,5}/")
# https://<long opaque user>@host: a token used as the user name (x-access-token style, DSNs).
_URL_TOKEN_USER = _on_first_use(r"(?P<pre>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<secret>[A-Za-z0-9_\-.~%]{20,})(?P<post>@)")
# Authorization headers: `Bearer X`, `Basic X`, `Digest X` anywhere, `token X` only after
# `Authorization:` (GitHub's form): a bare "Token Latency------" title in a benchmark's
# output is no credential.
_AUTH_HEADER = _on_first_use(r"(?i)(?P<pre>\b(?:bearer|basic|digest|(?<=authorization:)\s*token|(?<=authorization: )token)\s+)"
                          r"(?P<secret>[A-Za-z0-9._~+/\-]{12,}=*)")
# NAME=value and --name=value / --name value inside command lines and shell text.
# An unquoted value ends at whitespace, a quote, ',', ';' or '&' (shell and URL-query separators).
# `name = value` with blanks around '=' is an INI/TOML/.properties line or Python code (`HF_TOKEN = "x"`
# in a patch, `-secret = x` a removed line of one); '==' is a comparison, never an assignment. A name
# after `--` or `x-` is a flag's or a word's tail (_FLAG reads `--token=x`).
_ASSIGNMENT = _on_first_use(r"(?P<pre>(?<![A-Za-z0-9_])(?<![A-Za-z0-9_\-]-)(?P<name>[A-Za-z_][A-Za-z0-9_.]*)[ \t]*=(?!=)[ \t]*)"
                            r"(?P<secret>\"[^\"]*\"|'[^']*'|[^\s\"',;&]+)")
# A .netrc entry: `machine host login bob password X` (or `passwd`, `account`), on one line or over
# several (the keyword and its value on one). Only on a line made of netrc keywords and their values
# alone: "password was rejected" and "account for this" are prose.
_NETRC_LINE = _on_first_use(r"(?m)^[ \t]*[+\-]?[ \t]*(?:(?:machine|default|login|password|passwd|account|port|macdef)"
                            r"(?:[ \t]+\S+)?[ \t]*)+$")
_NETRC_SECRET = _on_first_use(r"(?P<pre>(?<![A-Za-z0-9_\-])(?:password|passwd|account)[ \t]+)(?P<secret>\"[^\"]*\"|'[^']*'|[^\s\"'=:][^\s\"']*)")
_FLAG = _on_first_use(r"(?P<pre>(?<![A-Za-z0-9_\-])(?P<flag>--?[A-Za-z][A-Za-z0-9_\-]*)(?:=|\s+(?![=:])))(?P<secret>\"[^\"]*\"|'[^']*'|[^\s\"',;&]+)")
# What may precede `name = value` on its line: blanks, a diff's +/-, `export`, `set`, `let`.
_LINE_START = re.compile(r"[ \t]*[+\-]?[ \t]*(?:(?:export|set|let|local|declare|readonly)[ \t]+)?$")
_CALL = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\(")
_NUMBER = _on_first_use(r"^[-+]?[0-9][0-9.,_]*%?$")
# ... as are `#new-token: 1024` and `#cached-token: 0` of its prefill log.
_TOKEN_COUNT = _on_first_use(r"(?i)(?:^|[_.\-])tokens?$")
# `password: value` (YAML, logs, HTTP headers such as X-Api-Key): a colon and at least one space. A name after
# '/' is a path's last part: "/etc/passwd: not valid JSON" is a message about a file, not a key and its value.
_COLON_PAIR = _on_first_use(r"(?P<pre>(?<![A-Za-z0-9_\-/])(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)[ \t]*:[ \t]+)(?P<secret>\"[^\"]*\"|'[^']*'|[^\s\"',;]+)")
# "name": "value" inside JSON-like text: double quotes with JSON escapes, single quotes
# (Python reprs), and the \"name\": \"value\" of JSON held in a JSON string.
_XML_ELEMENT = _on_first_use(r"(?P<pre><(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)(?:\s[^<>]*)?>)(?P<secret>[^<>\s][^<>]*?)"
                             r"(?P<post></(?P=name)\s*>)")
_JSON_PAIRS = [
    _on_first_use(r'(?P<pre>"(?P<name>[A-Za-z0-9_.\-]+)"\s*:\s*")(?P<secret>(?:[^"\\]|\\.)*)(?P<post>")'),
    _on_first_use(r"(?P<pre>'(?P<name>[A-Za-z0-9_.\-]+)'\s*:\s*')(?P<secret>(?:[^'\\]|\\.)*)(?P<post>')"),
    _on_first_use(r'(?P<pre>\\"(?P<name>[A-Za-z0-9_.\-]+)\\"\s*:\s*\\")(?P<secret>.*?)(?P<post>\\")'),
]


# Strings made only of these characters (paths, hashes, versions, numbers) can hold a
# credential only in one of the value shapes: skip the costlier named-pair patterns.
_PLAIN = re.compile(r"^[A-Za-z0-9_./+,~#%\-]*$")


def _needs_work(text: str) -> bool:
    """False for a string that cannot hold a credential: only _PLAIN characters and no
    credential-shape literal (paths, hashes, versions, numbers: most of a snapshot). Two
    cheap scans (a character class, a literal alternation) rather than every pattern."""
    return _PLAIN.match(text) is None or _SHAPE_TRIGGER.search(text) is not None


def _replace_shapes(text: str) -> str:
    """Fingerprint every credential shape, all found in the original text first: replacing
    one at a time would glue a fingerprint to the next token and hide its word boundary."""
    spans = []
    for pattern in _value_patterns():
        # Overlapping search (resume one character after each match's start, not at its end):
        # in `hvs.X-hvs.Y` the first match swallows the second one's prefix, which must still
        # be found for Y not to be left behind.
        match = pattern.search(text)
        while match is not None:
            spans.append((match.start(), match.end()))
            match = pattern.search(text, match.start() + 1)
    if not spans:
        return text
    spans.sort()
    merged: List[List[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    pieces, last = [], 0
    for start, end in merged:
        pieces.append(text[last:start])
        pieces.append(fingerprint(text[start:end]))
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def redact_text(text: str) -> str:
    """Replace every credential-looking part of a string with its fingerprint.

    Idempotent: a fingerprint is never fingerprinted again, so scrubbing a scrubbed
    snapshot (attach, merge, save) changes nothing.
    """
    if not text or not isinstance(text, str) or not _needs_work(text):
        return text
    return _redact_checked(text)


def _redact_checked(text: str) -> str:
    """redact_text for a string _needs_work said yes to."""
    if _REDACTED_RE.match(text):
        return text
    if len(text) <= 256:
        return _redact_short(text)  # short strings repeat (notes, statuses): computed once each
    return _redact(text)


@functools.lru_cache(maxsize=32768)
def _redact_short(text: str) -> str:
    return _redact(text)


def _redact(text: str) -> str:
    shaped = _SHAPE_TRIGGER.search(text) is not None
    if not shaped and _PLAIN.match(text):
        return text
    out = text
    if shaped:
        out = _replace_shapes(out)

    def _part(m: "re.Match[str]") -> str:
        secret = m.group("secret")
        if _REDACTED_RE.match(secret) or secret.startswith(REDACTED_PREFIX):
            return m.group(0)
        return m.group("pre") + fingerprint(secret) + m.group("post")

    if "://" in out:
        out = _URL_CREDENTIALS.sub(_url_part, out)
        out = _URL_TOKEN_USER.sub(_part, out)
    out = _AUTH_HEADER.sub(lambda m: m.group(0) if m.group("secret").startswith(REDACTED_PREFIX)
                           else m.group("pre") + fingerprint(m.group("secret")), out)
    out = _redact_program_flags(out)
    if ("password" in out or "passwd" in out or "account" in out) and _NETRC_LINE.search(out):
        out = _NETRC_LINE.sub(lambda line: _NETRC_SECRET.sub(_part_or_keep, line.group(0)), out)

    def _named(m: "re.Match[str]") -> str:
        secret = m.group("secret")
        name = m.groupdict().get("name") or m.group("flag")
        bare = secret.strip("\"'")
        flag = m.groupdict().get("flag")
        if flag is not None:
            secret_name = _flag_hides(flag, bare)
        else:
            secret_name = is_secret_value(name, bare)
            if secret_name and m.re is _ASSIGNMENT._compiled and m.group("pre")[-1] in " \t" and (
                    not _LINE_START.match(m.string, m.string.rfind("\n", 0, m.start()) + 1, m.start())
                    or _CALL.match(bare)):
                # `name = value` with blanks is a config or code line only at its start: in prose
                # ("with DEFAULT_LAST_PASS = 2 each") it is a sentence; `new_key = table.get(k)`
                # (code quoted in a comment) binds a call's result.
                secret_name = False
        if not secret_name or not bare or _REDACTED_RE.match(bare) or not bare.strip(".\u2026"):  # `NAME=...`
            if len(secret) >= 2 and secret[0] == secret[-1] and secret[0] in "\"'":
                # A quoted value is one match: look inside it (NAME='...;AccountKey=...').
                return m.group("pre") + secret[0] + redact_text(secret[1:-1]) + secret[-1]
            return m.group(0)
        if m.groupdict().get("flag") and bare.startswith("-"):
            return m.group(0)  # `--token --next-flag`: the flag had no value
        return m.group("pre") + fingerprint(bare)

    if "=" in out:
        out = _ASSIGNMENT.sub(_named, out)
    if "-" in out:
        out = _FLAG.sub(_named, out)
    if ":" in out:
        # `#token: 1064` on every line of SGLang's decode log is a count of text tokens.
        out = _COLON_PAIR.sub(lambda m: m.group(0) if _TOKEN_COUNT.search(m.group("name"))
                              and _NUMBER.match(m.group("secret")) else _named(m), out)

    def _json(m: "re.Match[str]") -> str:
        secret = m.group("secret")
        if not secret or not is_secret_value(m.group("name"), secret) or _REDACTED_RE.match(secret):
            return m.group(0)
        return m.group("pre") + fingerprint(secret) + m.group("post")

    if "</" in out:
        # <password>x</password> of Maven's settings.xml, a .NET config, a pip.conf-turned-XML.
        # A count is no secret: nvidia-smi -q -x's <session_count>0</session_count>.
        out = _XML_ELEMENT.sub(lambda m: m.group(0) if not is_secret_value(m.group("name"), m.group("secret"))
                               or m.group("secret").startswith(REDACTED_PREFIX) or _NUMBER.match(m.group("secret"))
                               else m.group("pre") + fingerprint(m.group("secret")) + m.group("post"), out)
    if '"' in out or "'" in out:
        for pattern in _JSON_PAIRS:
            out = pattern.sub(_json, out)
        # Code pasted into any text (a patch of a .py file read as a whole, a log quoting a line):
        # os.environ["HF_TOKEN"] = "x", setdefault("API_KEY", "x"), ["--api-key", "x"].
        out = _sub_overlapping(_CODE_QUOTED_NAME, _code_literal, out)
    return out


def _url_part(m: "re.Match[str]") -> str:
    secret = m.group("secret")
    if secret.startswith(REDACTED_PREFIX) or _PORT_AND_PATH.match(secret):
        return m.group(0)  # host:port/path@ref, not user:password@host
    return m.group("pre") + fingerprint(secret) + m.group("post")


def _part_or_keep(m: "re.Match[str]") -> str:
    bare = m.group("secret").strip("\"'")
    if not bare or bare.startswith(REDACTED_PREFIX):
        return m.group(0)
    return m.group("pre") + fingerprint(bare)


# ---------------------------------------------------------------- programs' own credential flags

# Flags whose name does not say "secret" but whose program documents them as one (each program's
# man page): mysql's `-pX` (attached only: `mysql -p db` prompts and names a database), sshpass's
# `-p X`, curl's `-u user:password` (the part after the first ':'), redis-cli's `-a X`, mongosh's `-p X`.
# "value": the flag's value, attached or next; "attached": only an attached value; "userpass": what
# follows the first ':' of the value.
_MYSQL_STYLE = {"-p": "attached"}
_PROGRAM_FLAGS = {
    **{name: _MYSQL_STYLE for name in ("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlcheck",
                                        "mysqlshow", "mysqlpump", "mysqlsh", "mariadb", "mariadb-dump",
                                        "mariadb-admin")},
    "sshpass": {"-p": "value"},
    "curl": {"-u": "userpass", "--user": "userpass", "-U": "userpass", "--proxy-user": "userpass"},
    "redis-cli": {"-a": "value", "--pass": "value"},
    "mongosh": {"-p": "value"}, "mongo": {"-p": "value"}, "mongodump": {"-p": "value"},
    "mongorestore": {"-p": "value"},
}
_PROGRAM_LITERALS = ("mysql", "mariadb", "sshpass", "curl", "redis-cli", "mongo")
_PROGRAM_WORD = _on_first_use(
    r"(?<![A-Za-z0-9_.\-])(?:[^\s'\"=;&|]*/)?(?P<prog>" + "|".join(
        re.escape(n) for n in sorted(_PROGRAM_FLAGS, key=len, reverse=True)) + r")(?=[\s'\"]|$)")
# A word of shell text, a quoted one whole; `;`, `&`, `|` and a line end end the command.
_SHELL_WORD = _on_first_use(r"\"[^\"\n]*\"|'[^'\n]*'|[^\s;&|\"']+|[;&|\n]")


def _flag_secret(word: str, rules: Mapping[str, str], pending: Optional[str]) -> Tuple[Optional[Tuple[int, int]], Optional[str]]:
    """(the span of `word` that is a secret or None, the kind of value the next word is) for one word
    of a command line of a program in _PROGRAM_FLAGS, given the kind the previous word left pending."""
    quoted = len(word) >= 2 and word[0] == word[-1] and word[0] in "\"'"
    start, end = (1, len(word) - 1) if quoted else (0, len(word))
    if pending is not None and not (word.startswith("-") and len(word) > 1):
        return _value_span(word, start, end, pending), None
    for flag, kind in rules.items():
        if word == flag:
            return None, (None if kind == "attached" else kind)
        if flag.startswith("--") and word.startswith(flag + "="):
            return _value_span(word, len(flag) + 1, len(word), kind), None
        if len(flag) == 2 and word.startswith(flag) and len(word) > 2 and not flag.startswith("--"):
            return _value_span(word, 2, len(word), kind), None
    return None, None


def _value_span(word: str, start: int, end: int, kind: str) -> Optional[Tuple[int, int]]:
    if end - start >= 2 and word[start] == word[end - 1] and word[start] in "\"'":
        start, end = start + 1, end - 1
    if kind == "userpass":
        colon = word.find(":", start, end)
        if colon == -1:
            return None  # `curl -u bob` prompts for the password
        start = colon + 1
    value = word[start:end]
    if not value or value.startswith(REDACTED_PREFIX):
        return None
    return start, end


def _redact_program_flags(text: str) -> str:
    """Fingerprint the values of _PROGRAM_FLAGS in shell text (`mysql -uroot -pX db`, `curl -u a:X`)."""
    if not any(literal in text for literal in _PROGRAM_LITERALS):
        return text
    spans: List[Tuple[int, int]] = []
    for program in _PROGRAM_WORD.finditer(text):
        rules, pending = _PROGRAM_FLAGS[program.group("prog")], None
        for word in _SHELL_WORD.finditer(text, program.end()):
            if word.group(0) in ";&|\n":
                break
            span, pending = _flag_secret(word.group(0), rules, pending)
            if span is not None:
                spans.append((word.start() + span[0], word.start() + span[1]))
    if not spans:
        return text
    pieces, last = [], 0
    for start, end in sorted(set(spans)):
        if start < last:
            continue
        pieces.append(text[last:start])
        pieces.append(fingerprint(text[start:end]))
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def redact_value(name: str, value: str) -> str:
    """Redact one named value: wholly when its name looks secret, else by shape."""
    if not isinstance(value, str):
        return value
    if value and is_secret_value(name, value) and not is_redacted(value):
        return fingerprint(value)
    return redact_text(value)


def redact_env(env: Mapping[str, str]) -> dict:
    """A copy of an environment mapping with secrets replaced."""
    return {k: redact_value(k, v) for k, v in env.items()}


def redact_argv(argv: Iterable[str]) -> List[str]:
    """Redact a command line given as a list: `--api-key X`, `--token=X`, shapes in any argument."""
    out: List[str] = []
    hide_next = ""  # the secret flag whose value comes next
    rules: Optional[Mapping[str, str]] = None  # the flags of the last program named (`sudo mysql -pX`)
    pending: Optional[str] = None
    for arg in argv:
        arg = str(arg)
        program = _PROGRAM_FLAGS.get(arg.rsplit("/", 1)[-1]) if "-" not in arg[:1] else None
        if program is not None:
            rules, pending = program, None
        elif rules is not None:
            span, pending = _flag_secret(arg, rules, pending)
            if span is not None:
                out.append(arg[:span[0]] + fingerprint(arg[span[0]:span[1]]) + arg[span[1]:])
                continue
        if hide_next:
            flag, hide_next = hide_next, ""
            if (not arg.startswith("-") or len(arg) < 2) and _flag_hides(flag, arg):
                out.append(fingerprint(arg) if arg and not is_redacted(arg) else arg)
                continue
            # `--token --next-flag`: the flag had no value; look at this one normally.
        if arg.startswith("-") and "=" in arg:
            name, _, value = arg.partition("=")
            if value and _flag_hides(name, value) and not is_redacted(value):
                out.append(f"{name}={fingerprint(value)}")
            else:
                out.append(redact_text(arg))
            continue
        if arg.startswith("-") and is_secret_setting(arg):
            hide_next = arg
            out.append(arg)
            continue
        out.append(redact_text(arg))
    return out


def clean_text(text: str) -> str:
    """Make a str safe for JSON/UTF-8: undecodable bytes (surrogate escapes) become \\xNN text."""
    if text.isascii():  # nearly every string: no encoding work at all
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace") \
            if _encodable_escape(text) else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _encodable_escape(text: str) -> bool:
    try:
        text.encode("utf-8", "surrogateescape")
        return True
    except UnicodeEncodeError:
        return False


# Field names of envsnap's own records, repeated in every entry of a big section.
_PLAIN_KEYS = frozenset({"sha256", "size", "error", "dist", "recorded_sha256", "actual_sha256", "recorded_size",
                         "actual_size", "status", "data", "pid", "ppid", "title", "cmdline", "environ", "role",
                         "name", "version", "location", "installer", "origin", "kind", "link", "type", "skipped"})


@functools.lru_cache(maxsize=16384)  # keys repeat ("sha256", "dist") thousands of times a snapshot
def _clean_key(key: str, redact: bool) -> str:
    key = clean_text(key)
    return redact_text(key) if redact else key


def scrub(obj: Any, redact: bool = True, _key: str = "") -> Any:
    """Clean a whole JSON-like structure; with redact, also replace secrets.

    Secret-named keys' string values (and the strings of lists under them) are replaced
    wholesale, credential shapes everywhere, keys included (a file named after a token
    would otherwise show it). A list of strings is read as a command line, so that
    `["--api-key", "X"]` loses X even where a collector forgot redact_argv. Undecodable
    bytes in any string or key become visible escapes; NaN, infinities and integers beyond
    64 bits become text.
    """
    if isinstance(obj, dict):
        result = {}
        needs_work = _needs_work
        for key, value in obj.items():
            if type(key) is str:
                if not key.isascii() or (redact and key not in _PLAIN_KEYS and needs_work(key)):
                    key = _clean_key(key, redact)
                name = key
            else:
                name = str(key)
            if type(value) is str:
                if not value.isascii():
                    value = clean_text(value)
                if redact and value:
                    if is_secret_name(name):
                        value = redact_value(name, value)
                    elif needs_work(value):
                        value = _redact_checked(value)
                result[key] = value
            elif type(value) in (int, bool) or value is None:
                result[key] = _plain_number(value) if type(value) is int else value
            elif type(value) is float:
                result[key] = _plain_number(value)
            else:
                result[key] = scrub(value, redact, name)
        return result
    if isinstance(obj, list):
        if redact and obj and all(isinstance(v, str) for v in obj):
            cleaned = [clean_text(v) for v in obj]
            if _key and is_secret_name(_key):
                return [v if not v or is_redacted(v) else fingerprint(v) for v in cleaned]
            return redact_argv(cleaned)
        return [scrub(v, redact, _key) for v in obj]
    if isinstance(obj, str):
        obj = clean_text(obj)
        if redact and _key and is_secret_name(_key) and obj and not is_redacted(obj):
            return fingerprint(obj)
        return redact_text(obj) if redact else obj
    if type(obj) in (int, float):
        return _plain_number(obj)
    return obj


def _plain_number(value: Any) -> Any:
    """A number JSON can carry and every reader can compute with; else its text. NaN from a
    server's /server_info (an accept length before the first request) or a 128-bit counter
    would otherwise make the snapshot unwritable (NaN) or unreadable (huge integers)."""
    if type(value) is float:
        return value if value - value == 0.0 else repr(value)  # inf - inf and nan - nan are nan
    if -(2 ** 64) < value < 2 ** 64:
        return value
    return str(value)


# ---------------------------------------------------------------- the text of files

# A line of a file can hold a named credential only when it names one (these fragments, lower-cased,
# are in every name is_secret_name accepts), carries a URL or an Authorization header, or holds a
# credential-shape literal. Only such lines are redacted: redact_text on a whole 118 KB source file
# (sglang's scheduler.py) takes ~0.3 s, this ~10 ms.
_FILE_FRAGMENTS = ("token", "secret", "pass", "pw", "key", "auth", "cookie", "priv", "session", "sig", "bearer",
                   "jwt", "dsn", "cred", "webhook", "://", "basic", "digest", "account",
                   *_PROGRAM_LITERALS)
# Name words too short to look for as fragments ("pat" is in every "path"): found as whole words.
_FILE_WORDS = ("pat",)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_SHAPE_LITERALS = tuple(t for triggers, _ in _SHAPES for t in triggers)
# Source code: a name is bound to a credential only through a string literal. `api_key=self.api_key`
# or `req_to_token_pool=self.req_to_token_pool` binds a variable, so a bare value is code, never
# redacted there (the shell rules of redact_text would hide every such keyword argument).
_CODE_SUFFIXES = (".py", ".pyi", ".pyx", ".pxd", ".pth", ".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp",
                  ".cu", ".cuh", ".rs", ".go", ".java", ".js", ".mjs", ".ts", ".jl", ".lua", ".scala", ".kt")
_STR = r"[rbuRBUfF]{0,2}(?P<q>\"|')(?P<secret>(?:\\.|(?!(?P=q))[^\\\n])*)(?P<post>(?P=q))"


# token = "x" · token: str = "x" · token="x" (keyword argument) · token: "x" (a dict of names);
# not `pw = "\n".join(parts)`: the literal is a separator or a template there.
_CODE_NAMED: "re.Pattern[str]" = _on_first_use(
    r"(?P<pre>(?<![A-Za-z0-9_\"'])(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(?::\s*[A-Za-z_][\w\[\], .]*)?"
    r"\s*(?::|=(?!=))\s*)" + _STR + r"(?!\s*\.(?:join|format|split|rsplit|partition)\b)")
# os.environ["HF_TOKEN"] = "x" · setdefault("HF_TOKEN", "x") · {"api_key": "x"} · ["--api-key", "x"]
_CODE_QUOTED_NAME: "re.Pattern[str]" = _on_first_use(
    r"(?P<pre>(?P<q0>[\"'])(?P<name>-{0,2}[A-Za-z_][A-Za-z0-9_.\-]*)(?P=q0)\s*(?:\]\s*=(?!=)|,|:)\s*)" + _STR)
_STRING_LITERAL: "re.Pattern[str]" = _on_first_use(r"(\"|')((?:\\.|(?!\1)[^\\\n])*)\1")
_PEM: "re.Pattern[str]" = _on_first_use(_SHAPES[0][1], re.S)
# A comment (to the end of the line) of a shell-like language is free text: `# HF_TOKEN=abc`.
_COMMENT: "re.Pattern[str]" = _on_first_use(r"(?:^|(?<=\s))(?://|#)\s")


def is_source_code(path: str, text: str = "") -> bool:
    """Whether a file is source code in a language where names take values through string literals."""
    lowered = (path or "").lower()
    if lowered.endswith(_CODE_SUFFIXES):
        return True
    first = text[:200].split("\n", 1)[0] if text else ""
    return first.startswith("#!") and "python" in first


def redact_file_text(text: str, path: str = "") -> str:
    """Redact the text of a file (a working copy, a patch chunk, a start-up hook, a watched file).

    Credential shapes (PEM blocks span lines) are replaced in the whole text; then each line that
    can hold a named credential is redacted on its own: with redact_text's shell/config/JSON rules,
    or, in source code (is_source_code), only string literals bound to a secret name plus URLs,
    Authorization headers and comments. Idempotent like redact_text. A patch is redacted chunk by
    chunk with the path of each file it changes (see content.py)."""
    if not text or not isinstance(text, str):
        return text
    if "-----BEGIN " in text:  # the one shape that spans lines
        text = _PEM.sub(lambda m: fingerprint(m.group(0)), text)
    shaped = _lines_with(text, _SHAPE_LITERALS)
    lowered = _lower_same_offsets(text)
    named = _lines_with(lowered, _FILE_FRAGMENTS) | _lines_with_word(lowered, _FILE_WORDS)
    if not shaped and not named:
        return text
    code = is_source_code(path, text)
    pieces, last = [], 0
    for start in sorted(shaped | named):
        end = text.find("\n", start)
        end = len(text) if end == -1 else end
        line = text[start:end]
        if start in shaped:
            line = _replace_shapes(line)
        pieces.append(text[last:start])
        pieces.append(_redact_code_line(line) if code else redact_text(line))
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _lower_same_offsets(text: str) -> str:
    """text.lower() when it keeps every offset (no character lowers to two), else ASCII-only lowering."""
    lowered = text.lower()
    return lowered if len(lowered) == len(text) else text.translate(_ASCII_LOWER)


def _lines_with(text: str, literals: Tuple[str, ...]) -> Set[int]:
    """Start offsets of the lines that contain any of the literals. str.find runs at memchr speed:
    a regex alternation over a 300 KB file takes ~20 ms, these finds well under 1 ms."""
    starts: Set[int] = set()
    for literal in literals:
        found = text.find(literal)
        while found != -1:
            starts.add(text.rfind("\n", 0, found) + 1)
            line_end = text.find("\n", found)
            if line_end == -1:
                break
            found = text.find(literal, line_end)
    return starts


def _lines_with_word(text: str, words: Tuple[str, ...]) -> Set[int]:
    """Start offsets of the lines holding one of the words with no letter on either side (GITHUB_PAT,
    pat = x; not path, compat)."""
    starts: Set[int] = set()
    for word in words:
        found = text.find(word)
        while found != -1:
            after = found + len(word)
            if not (found and text[found - 1].isalpha()) and not (after < len(text) and text[after].isalpha()):
                starts.add(text.rfind("\n", 0, found) + 1)
            found = text.find(word, after)
    return starts


def _code_literal(m: "re.Match[str]") -> str:
    """A string literal bound to a secret name (_CODE_NAMED, _CODE_QUOTED_NAME), fingerprinted."""
    secret = m.group("secret")
    if not secret or not is_secret_value(m.group("name"), secret) or secret.startswith(REDACTED_PREFIX) \
            or "{" in secret:  # an f-string or format template names a variable, it holds no value
        return m.group(0)
    return m.group(0)[:m.start("secret") - m.start()] + fingerprint(secret) + m.group("post")


def _redact_code_line(line: str) -> str:
    out = _sub_overlapping(_CODE_QUOTED_NAME, _code_literal, line)
    out = _CODE_NAMED.sub(_code_literal, out)
    # Inside a string literal is free text again: "--api-key=X", "HF_TOKEN=X", "postgres://u:p@h".
    out = _STRING_LITERAL.sub(lambda m: m.group(1) + _redact_literal(m.group(2)) + m.group(1), out)
    out = _redact_values(out)
    comment = _COMMENT.search(out)
    if comment is not None:
        out = out[:comment.end()] + redact_text(out[comment.end():])
    return out


def _sub_overlapping(pattern: "re.Pattern[str]", repl: Any, text: str) -> str:
    """pattern.sub, but a match left unchanged does not swallow the next one: in
    `["serve", "--api-key", "X"]` the pair ("serve", "--api-key") must not hide ("--api-key", "X")."""
    pieces, last, position = [], 0, 0
    while True:
        match = pattern.search(text, position)
        if match is None:
            break
        replaced = repl(match)
        if replaced == match.group(0):
            position = match.start() + 1
            continue
        pieces.append(text[last:match.start()])
        pieces.append(replaced)
        last = position = match.end()
    pieces.append(text[last:])
    return "".join(pieces)


def _redact_literal(inner: str) -> str:
    lowered = inner.lower()
    if not any(f in lowered for f in _FILE_FRAGMENTS) and _SHAPE_TRIGGER.search(inner) is None:
        return inner
    if "{" in inner:  # a format template: `f"--token={token}"` names a variable; only value shapes count
        return _redact_values(inner)
    return redact_text(inner)


def _redact_values(text: str) -> str:
    """The rules that need no name: credentials in URLs, Authorization header values."""
    def part(m: "re.Match[str]") -> str:
        secret = m.group("secret")
        if secret.startswith(REDACTED_PREFIX):
            return m.group(0)
        return m.group("pre") + fingerprint(secret) + (m.groupdict().get("post") or "")

    if "://" in text:
        text = _URL_CREDENTIALS.sub(part, text)
        text = _URL_TOKEN_USER.sub(part, text)
    return _AUTH_HEADER.sub(part, text)
