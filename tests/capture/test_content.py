"""The content record (capture/collectors/content.py): one shape for a file's text, bounded, redacted,
lossless when complete; and the runner's snapshot-wide budget, applied in one fixed order."""
from __future__ import annotations

import hashlib
import json
import os

import pytest
from helpers import run_envsnap

from envsnap.capture import runner
from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import SECTION_SHAPES, content
from envsnap.model import schema


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write(path, data: bytes):
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize("data", [
    b"plain ascii\n",
    "caf\u00e9 \u2192 \u4e2d\u6587 \U0001f600\r\nCRLF kept\r\n".encode(),
    b"\xef\xbb\xbfa file with a BOM\n",
    b"no newline at the end",
    b"",
])
def test_a_complete_text_gives_back_the_file_byte_for_byte(tmp_path, data):
    record = content.read_file(_write(tmp_path / "f.txt", data), content.Budget())
    assert record == {"status": "text", "text": data.decode("utf-8"), "size": len(data), "sha256": _sha(data)}
    # Lossless and JSON-safe: through JSON and back, the text still encodes to the very bytes.
    again = json.loads(json.dumps(record, ensure_ascii=False))
    assert again["text"].encode("utf-8") == data and _sha(again["text"].encode("utf-8")) == record["sha256"]


@pytest.mark.parametrize("data, why", [(b"text then a NUL \x00 byte", "NUL"), (b"latin-1 caf\xe9\n", "not UTF-8"),
                                       (bytes(range(256)), "every byte")])
def test_binary_files_are_left_to_their_hash(tmp_path, data, why):
    record = content.read_file(_write(tmp_path / "b.bin", data), content.Budget())
    assert record == {"status": "binary", "size": len(data), "sha256": _sha(data)}, why


def test_over_the_per_file_bound_the_start_is_kept_on_a_whole_character(tmp_path):
    data = ("a" * 9 + "\u00e9" + "tail" * 100).encode()  # the bound falls inside the two-byte é
    record = content.read_file(_write(tmp_path / "big.txt", data), content.Budget(max_file=10))
    assert record["status"] == "truncated" and record["text"] == "a" * 9
    assert record["size"] == len(data) and record["sha256"] == _sha(data)  # of the whole file
    # A known hash of the rest is reused (no second read of a multi-GB file) when the size agrees.
    known = {"size": len(data), "sha256": "f" * 64}
    assert content.read_file(str(tmp_path / "big.txt"), content.Budget(max_file=10), known=known)["sha256"] == "f" * 64


def test_untracked_files_over_the_bound_are_too_large_and_budget_runs_out(tmp_path):
    big = _write(tmp_path / "data.jsonl", b"x" * 100)
    assert content.read_file(big, content.Budget(max_file=50), small_only=True) == {
        "status": "too_large", "size": 100, "sha256": _sha(b"x" * 100)}
    budget = content.Budget(max_file=100, max_total=15)
    first = content.read_file(_write(tmp_path / "a", b"0123456789"), budget)
    second = content.read_file(_write(tmp_path / "b", b"0123456789"), budget)
    third = content.read_file(_write(tmp_path / "c", b"012"), budget)
    assert first["status"] == "text" and third["status"] == "text"  # 10 + 3 fit in 15
    assert second == {"status": "over_budget", "size": 10, "sha256": _sha(b"0123456789")}


def test_unreadable_and_special_files_say_why(tmp_path):
    assert content.read_file(str(tmp_path / "missing"), content.Budget()) == {
        "status": "unreadable", "error": "does not exist"}
    os.mkfifo(tmp_path / "fifo")  # opened non-blocking: never hangs the capture
    assert content.read_file(str(tmp_path / "fifo"), content.Budget())["error"] == "not a regular file"
    past = content.read_file(_write(tmp_path / "late", b"x"), content.Budget(), known={"size": 1, "sha256": "ab"},
                             deadline=0.0)
    assert past == {"status": "unreadable", "error": content.DEADLINE_ERROR, "size": 1, "sha256": "ab"}


def test_redaction_changes_the_text_but_never_the_hash(tmp_path):
    token = "hf_" + "Q" * 30
    data = f"export HF_TOKEN={token}\nexport NCCL_PROTO=LL\n".encode()
    record = content.read_file(_write(tmp_path / "env.sh", data), content.Budget())
    assert token not in record["text"] and "redacted:" in record["text"] and "NCCL_PROTO=LL" in record["text"]
    assert record["redacted"] is True and record["sha256"] == _sha(data) and record["size"] == len(data)
    plain = content.read_file(str(tmp_path / "env.sh"), content.Budget(redact=False))
    assert plain["text"] == data.decode() and "redacted" not in plain


def test_source_code_keeps_variables_bound_to_names_that_look_secret(tmp_path):
    # sglang 0.5.5 scheduler.py passes `req_to_token_pool=self.req_to_token_pool`: a variable, not a value.
    code = ("pool = Pool(req_to_token_pool=self.req_to_token_pool, api_key=self.api_key)\n"
            'HF_TOKEN = "plain-secret-value"\n')
    record = content.read_file(_write(tmp_path / "m.py", code.encode()), content.Budget())
    assert record["text"].splitlines()[0] == code.splitlines()[0]
    assert "plain-secret-value" not in record["text"] and record["redacted"] is True


def test_the_runner_keeps_file_text_out_of_the_generic_scrub(tmp_path):
    """The generic scrub would redact `x_token_y=z` keyword arguments in source code; the runner holds
    records aside (the text was redacted by the rules for file text) and the section still validates."""
    code = b"def f(self):\n    return g(req_to_token_pool=self.req_to_token_pool)\n"
    path = _write(tmp_path / "code.py", code)
    ctx = CaptureContext(watch=[path], timeout=20, cwd=str(tmp_path))
    snap = runner.capture(ctx, only=["files"])
    record = snap["sections"]["files"]["data"]["entries"][path]["content"]
    assert record == {"status": "text", "text": code.decode(), "size": len(code), "sha256": _sha(code)}
    schema.validate(snap, shapes=SECTION_SHAPES)


def _section(records):
    return {"status": "ok", "data": {"entries": {f"/w/{i}": {"content": dict(r)} for i, r in enumerate(records)}}}


def test_the_snapshot_budget_is_applied_in_one_fixed_order_whatever_finished_first():
    def text(n):
        return {"status": "text", "text": "x" * n, "size": n, "sha256": "s"}

    sections = {
        "files": _section([text(40)]),
        "git": {"status": "ok", "data": {"repos": {"/r": {"dirty": {"a.py": {"patch": text(30), "content": text(30)}},
                                                         "untracked": {"n.md": {"content": text(30)}}}}}},
        "python": {"status": "ok", "data": {"startup_hooks": {"/s.py": {"content": text(5)}}}},
    }
    content.enforce_total(sections, 65)
    repo = sections["git"]["data"]["repos"]["/r"]
    assert repo["dirty"]["a.py"]["patch"]["status"] == "text" and repo["dirty"]["a.py"]["content"]["status"] == "text"
    assert repo["untracked"]["n.md"]["content"] == {"status": "over_budget", "size": 30, "sha256": "s"}
    assert sections["python"]["data"]["startup_hooks"]["/s.py"]["content"]["status"] == "text"  # 60 + 5 fit
    assert sections["files"]["data"]["entries"]["/w/0"]["content"]["status"] == "over_budget"


def test_cli_bounds_and_their_refusal(tmp_path):
    watched = tmp_path / "w"
    watched.mkdir()
    (watched / "a.txt").write_text("a" * 3000)
    (watched / "b.txt").write_text("b" * 300)

    def capture(*options):
        out = tmp_path / "s.json"
        done = run_envsnap("capture", "-o", out, "--force", "--watch", watched, "--timeout", "20", *options,
                           cwd=str(tmp_path))
        assert done.returncode == 0, done.stderr
        entries = json.loads(out.read_text())["sections"]["files"]["data"]["entries"]
        return entries[str(watched / "a.txt")]["content"], entries[str(watched / "b.txt")]["content"]

    a, b = capture("--content-max-file", "2K")
    assert a["status"] == "truncated" and a["text"] == "a" * 2048 and a["size"] == 3000
    assert b == {"status": "text", "text": "b" * 300, "size": 300, "sha256": _sha(b"b" * 300)}
    a, b = capture("--content-max-total", "0")  # no text at all: every file still says so, with its hash
    assert a == {"status": "over_budget", "size": 3000, "sha256": _sha(b"a" * 3000)}
    assert b["status"] == "over_budget"
    refused = run_envsnap("capture", "-o", tmp_path / "x.json", "--content-max-file", "lots")
    assert refused.returncode == 2 and "is not a size" in refused.stderr
    assert "Traceback" not in refused.stderr
