"""Secret redaction: names that look secret and values that look like credentials.

A redacted value becomes ``redacted:<8 hex of sha256(value)>`` so that a changed
secret still shows as changed in a diff, while the value itself never reaches a
snapshot, a report or an error message. Every string a collector records goes
through `scrub` (see capture.py), and every environment mapping through `redact_env`.
"""
from __future__ import annotations

import hashlib
import re
from typing import Any, Iterable, List, Mapping

REDACTED_PREFIX = "redacted:"
_REDACTED_RE = re.compile(r"^redacted:[0-9a-f]{8}$")

# Name parts (split on _ - . and case changes are not used: env names are upper-snake)
# that make a variable or argument secret. TOKENIZERS_PARALLELISM must stay visible
# (it changes CPU threads), so TOKEN matches as a whole part only, or as a suffix
# of a part (HFTOKEN), never as a prefix (TOKENIZER).
_SECRET_PARTS = {
    "TOKEN", "TOKENS_SECRET", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASSPHRASE", "PASS",
    "PWD_SECRET", "APIKEY", "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "COOKIE", "COOKIES",
    "PRIVATE", "SESSION", "SIGNATURE", "BEARER", "JWT", "DSN",
}
_SECRET_PAIRS = {("API", "KEY"), ("ACCESS", "KEY"), ("PRIVATE", "KEY"), ("SECRET", "KEY"),
                 ("SESSION", "KEY"), ("CLIENT", "SECRET"), ("AUTH", "KEY"), ("MASTER", "KEY"),
                 ("ENCRYPTION", "KEY"), ("SIGNING", "KEY"), ("WEBHOOK", "URL")}
_SECRET_SUBSTRINGS = ("PASSWORD", "PASSWD", "SECRET", "APIKEY", "CREDENTIAL", "PRIVATEKEY", "ACCESSKEY")
# Names that match the rules above but are known not to be secret and matter for speed.
_NOT_SECRET = {"PWD", "OLDPWD", "TOKENIZERS_PARALLELISM", "PASSTHROUGH"}


def is_secret_name(name: str) -> bool:
    """True when a variable/argument/key name looks like it holds a secret."""
    upper = name.strip().lstrip("-").upper().replace("-", "_").replace(".", "_")
    if not upper or upper in _NOT_SECRET:
        return False
    compact = upper.replace("_", "")
    if any(s in compact for s in _SECRET_SUBSTRINGS):
        return True
    parts = [p for p in upper.split("_") if p]
    for i, part in enumerate(parts):
        if part in _SECRET_PARTS:
            return True
        if part.endswith("TOKEN") and not part.startswith("TOKENIZ"):
            return True
        if i + 1 < len(parts) and (part, parts[i + 1]) in _SECRET_PAIRS:
            return True
    return False


def fingerprint(value: str) -> str:
    """The stand-in for a secret: stable, short, and not the secret."""
    digest = hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"{REDACTED_PREFIX}{digest}"


def is_redacted(value: Any) -> bool:
    return isinstance(value, str) and bool(_REDACTED_RE.match(value))


# Credential shapes recognised wherever they appear inside a string.
_VALUE_PATTERNS = [
    # PEM blocks (private keys, certificates with keys): the whole block.
    re.compile(r"-----BEGIN [A-Z0-9 ]*-----.*?(?:-----END [A-Z0-9 ]*-----|\Z)", re.S),
    # JSON web tokens: three base64url parts, the first a JSON header.
    re.compile(r"eyJ[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]{6,}\.[A-Za-z0-9_\-]{4,}"),
    re.compile(r"\bhf_[A-Za-z0-9]{16,}"),                      # Hugging Face
    re.compile(r"\bsk-(?:ant-|proj-|live-)?[A-Za-z0-9_\-]{16,}"),  # OpenAI / Anthropic style
    re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),  # Stripe
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),               # GitHub tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bglpat-[A-Za-z0-9_\-]{16,}"),                # GitLab
    re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),           # Slack
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),                  # Google API keys
    re.compile(r"\bnpm_[A-Za-z0-9]{30,}"),                     # npm
    re.compile(r"\bpypi-[A-Za-z0-9_\-]{30,}"),                 # PyPI upload tokens
    re.compile(r"\bwandb_v1_[A-Za-z0-9_\-]{20,}"),
    re.compile(r"\b(?:SG|sq0atp|sq0csp)\.[A-Za-z0-9_\-]{16,}(?:\.[A-Za-z0-9_\-]{16,})?"),
]
# user:password@ in URLs: only the password part is replaced.
_URL_CREDENTIALS = re.compile(r"(?P<pre>[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@'\"]*:)(?P<secret>[^@\s/'\"]+)(?P<post>@)")
# Authorization headers.
_AUTH_HEADER = re.compile(r"(?i)(?P<pre>\b(?:bearer|basic|token)\s+)(?P<secret>[A-Za-z0-9._~+/\-]{12,}=*)")
# NAME=value and --name=value / --name value inside command lines and shell text.
_ASSIGNMENT = re.compile(r"(?P<pre>(?<![A-Za-z0-9_\-])(?P<name>[A-Za-z_][A-Za-z0-9_.]*)=)(?P<secret>\"[^\"]*\"|'[^']*'|[^\s\"',;]+)")
_FLAG = re.compile(r"(?P<pre>(?<![A-Za-z0-9_\-])(?P<flag>--?[A-Za-z][A-Za-z0-9_\-]*)(?:=|\s+))(?P<secret>\"[^\"]*\"|'[^']*'|[^\s\"',;]+)")
# "name": "value" inside JSON-like text.
_JSON_PAIR = re.compile(r"(?P<pre>[\"'](?P<name>[A-Za-z0-9_.\-]+)[\"']\s*:\s*[\"'])(?P<secret>[^\"']*)(?P<post>[\"'])")


_ANY_VALUE_PATTERN = re.compile("|".join(f"(?:{p.pattern})" for p in _VALUE_PATTERNS), re.S)
# Strings made only of these characters (paths, hashes, versions, numbers) can hold a
# credential only in one of the value shapes: skip the costlier named-pair patterns.
_PLAIN = re.compile(r"^[A-Za-z0-9_./+,~#%\-]*$")


def redact_text(text: str) -> str:
    """Replace every credential-looking part of a string with its fingerprint."""
    if not text or not isinstance(text, str) or _REDACTED_RE.match(text):
        return text
    if _PLAIN.match(text) and not _ANY_VALUE_PATTERN.search(text):
        return text
    out = text
    for pattern in _VALUE_PATTERNS:
        out = pattern.sub(lambda m: fingerprint(m.group(0)), out)
    out = _URL_CREDENTIALS.sub(lambda m: m.group("pre") + fingerprint(m.group("secret")) + m.group("post"), out)
    out = _AUTH_HEADER.sub(lambda m: m.group("pre") + fingerprint(m.group("secret")), out)

    def _named(m: "re.Match[str]") -> str:
        secret = m.group("secret")
        name = m.groupdict().get("name") or m.group("flag")
        bare = secret.strip("\"'")
        if not is_secret_name(name) or not bare or _REDACTED_RE.match(bare):
            return m.group(0)
        if m.groupdict().get("flag") and bare.startswith("-"):
            return m.group(0)  # `--token --next-flag`: the flag had no value
        return m.group("pre") + fingerprint(bare)

    out = _ASSIGNMENT.sub(_named, out)
    out = _FLAG.sub(_named, out)

    def _json(m: "re.Match[str]") -> str:
        if not is_secret_name(m.group("name")) or not m.group("secret") or _REDACTED_RE.match(m.group("secret")):
            return m.group(0)
        return m.group("pre") + fingerprint(m.group("secret")) + m.group("post")

    out = _JSON_PAIR.sub(_json, out)
    return out


def redact_value(name: str, value: str) -> str:
    """Redact one named value: wholly when its name looks secret, else by shape."""
    if not isinstance(value, str):
        return value
    if is_secret_name(name) and value and not is_redacted(value):
        return fingerprint(value)
    return redact_text(value)


def redact_env(env: Mapping[str, str]) -> dict:
    """A copy of an environment mapping with secrets replaced."""
    return {k: redact_value(k, v) for k, v in env.items()}


def redact_argv(argv: Iterable[str]) -> List[str]:
    """Redact a command line given as a list: `--api-key X`, `--token=X`, shapes in any argument."""
    out: List[str] = []
    hide_next = False
    for arg in argv:
        arg = str(arg)
        if hide_next:
            out.append(fingerprint(arg) if not is_redacted(arg) else arg)
            hide_next = False
            continue
        if arg.startswith("-") and "=" in arg:
            name, _, value = arg.partition("=")
            out.append(f"{name}={fingerprint(value)}" if is_secret_name(name) and value else redact_text(arg))
            continue
        if arg.startswith("-") and is_secret_name(arg):
            hide_next = True
            out.append(arg)
            continue
        out.append(redact_text(arg))
    return out


def clean_text(text: str) -> str:
    """Make a str safe for JSON/UTF-8: undecodable bytes (surrogate escapes) become \\xNN text."""
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


def scrub(obj: Any, redact: bool = True) -> Any:
    """Clean a whole JSON-like structure; with redact, also replace secrets.

    Secret-named keys' string values are replaced wholesale, credential shapes
    everywhere. Undecodable bytes in any string or key become visible escapes.
    """
    if isinstance(obj, dict):
        result = {}
        for key, value in obj.items():
            key = clean_text(key) if isinstance(key, str) else key
            if isinstance(value, str):
                value = clean_text(value)
                result[key] = redact_value(str(key), value) if redact else value
            else:
                result[key] = scrub(value, redact)
        return result
    if isinstance(obj, list):
        return [scrub(v, redact) for v in obj]
    if isinstance(obj, str):
        obj = clean_text(obj)
        return redact_text(obj) if redact else obj
    return obj
