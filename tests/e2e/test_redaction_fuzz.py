"""Redaction fuzz: every secret shape, planted in every place envsnap records or prints, through the real CLI.

Issue 36 ("Secrets in clear text"): an attack on main found 19 of 55 planted secrets in snapshots, diffs
and reports. Here the whole corpus of helpers.hardening (cloud keys, service tokens, JWTs, PEM blocks,
URLs with credentials, secrets only a name or a flag gives away) plus the shapes of that attack (URL
userinfo with '/', `name = value` config lines, netrc, GITHUB_PAT / ADMIN_PW, `--db-pw X`, `--key X`,
`mysql -pX`, `curl -u user:X`, `sshpass -p X`, a token inside a kernel name) is planted in:

  environment     the capturing process's and a watched process's (`--pid`) environment
  argv            the watched process's command line, the `run` benchmark's command line
  file text       a watched file (INI, YAML, TOML, netrc, shell lines) and an untracked file of a checkout
  patches         a real git checkout's dirty files (Python assignments, shell exports): patch and content
  installed files a package the real pip installed in a real venv, edited in place (its RECORD tells)
  logs            a `--log` file
  traces          a profiler trace attached with `attach --trace` (kernel names)
  labels          `--label`
  probe records   the real probe in a real Python process (its records and the capture of them)
  server info     `--sglang-url` against a real HTTP server answering like SGLang's /server_info
  messages        `run`'s, `attach`'s (secret-shaped metric names) and `bisect`'s output
  outputs         `show -v`, `diff -v` (text, json), `report` (HTML), the bisect journal

and every output and every file envsnap wrote is searched for each secret's value and for pieces of
its random core (start, middle, end): found in clear must be 0. No fake stands in for anything that can
exist here; the SGLang server is the one stand-in (the shape of its /server_info is in
tests/capture/test_sglang_url.py, read from SGLang's http_server.py).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, List, Tuple

import pytest
from helpers.git import init_repo
from helpers.hardening import CORPUS, Secret, _gen, run_cli

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Shape:
    """A secret and how it sits on a command line and in a line of text (default: by its name or flag)."""

    secret: Secret
    argv: Tuple[str, ...] = ()
    line: str = ""
    places: Tuple[str, ...] = field(default=())

    @property
    def single_line(self) -> bool:
        return "\n" not in self.secret.value

    def argv_form(self) -> List[str]:
        s = self.secret
        if self.argv:
            return list(self.argv)
        if s.flag:
            return [s.flag, s.value]
        if s.self_identifying:
            return [s.value]
        return [f"{s.name}={s.value}"]

    def line_form(self) -> str:
        s = self.secret
        if self.line:
            return self.line
        if not self.single_line:
            return s.value.rstrip("\n")
        if s.self_identifying:
            return f"using {s.value} for upload"
        return f"{s.name}={s.value}"


def _plain(shape: str, name: str, n: int = 20, self_identifying: bool = False, flag: str = "") -> Secret:
    core = _gen("fuzz-" + shape, n)
    return Secret(shape, name, core, core, self_identifying, flag)


def _issue_36_shapes() -> List[Shape]:
    """The shapes of issue 36's attack, each in the context that carried it."""
    url_core = _gen("fuzz-url-slash", 10) + "/" + _gen("fuzz-url-slash2", 8)
    url = Secret("url_password_with_slash", "REPO_REMOTE", f"https://bob:{url_core}@git.example/r.git", url_core)
    dsn_core = _gen("fuzz-mysql", 12) + "/x"
    dsn = Secret("mysql_url_password_with_slash", "DB_LOCATION", f"mysql://admin:{dsn_core}@db.internal:3306/app",
                 dsn_core[:-2])
    shapes = [Shape(url), Shape(dsn, line=f"  url: {dsn.value}")]
    for shape, name, flag, line in [
        ("github_pat_name", "GITHUB_PAT", "--github-pat", ""),
        ("admin_pw_name", "ADMIN_PW", "--admin-pw", ""),
        ("db_pw_flag", "DB_PW", "--db-pw", ""),
        ("bare_key_flag", "APP_KEY", "--key", ""),
        ("ini_password_line", "SMTP_PASSWORD", "", "password = {}"),
        ("toml_token_line", "BOT_TOKEN", "", 'token = "{}"'),
        ("ini_aws_secret_line", "AWS_SECRET_ACCESS_KEY_2", "", "aws_secret_access_key = {}"),
        ("yaml_pw_line", "PW", "", "pw: {}"),
        ("netrc_line", "NETRC_PASSWD", "", "machine example.com login bob password {}"),
        ("python_assignment", "HUB_TOKEN", "", '+HUB_TOKEN = "{}"'),
    ]:
        s = _plain(shape, name, flag=flag)
        shapes.append(Shape(s, line=line.format(s.value) if line else ""))
    for shape, name, argv in [
        ("mysql_attached_p", "MYSQL_ROOT_PASSWORD", ("mysql", "-uroot", "-p{}", "app")),
        ("curl_user_password", "CURL_PASSWORD", ("curl", "-u", "admin:{}", "https://h.example/")),
        ("sshpass_p", "SSHPASS", ("sshpass", "-p", "{}", "ssh", "h.example")),
        ("redis_cli_a", "REDISCLI_AUTH", ("redis-cli", "-a", "{}", "ping")),
    ]:
        s = _plain(shape, name)
        words = tuple(w.format(s.value) for w in argv)
        shapes.append(Shape(s, argv=words, line=" ".join(words)))
    return shapes


SHAPES = [Shape(s) for s in CORPUS] + _issue_36_shapes()
_METRIC_NAME = re.compile(r"^[A-Za-z0-9_.:\-]+$")


def _leaks(text: str) -> List[str]:
    return [sh.secret.shape for sh in SHAPES if sh.secret.leaked_in(text)]


# --- the places ----------------------------------------------------------------------------------

def _config_text() -> str:
    """A watched file in the syntaxes people keep settings in, every shape in each."""
    lines = ["[server]", "NCCL_PROTO = Simple"]
    for sh in SHAPES:
        s = sh.secret
        if not sh.single_line:
            lines.append(s.value.rstrip("\n"))
            continue
        lines += [sh.line_form(), f"export {s.name}='{s.value}'", f"{s.name.lower()} = {s.value}",
                  f"{s.name.lower()}: {s.value}", f'{s.name.lower()} = "{s.value}"']
    return "\n".join(lines) + "\n"


def _python_text() -> str:
    lines = ["import os"]
    for sh in SHAPES:
        s = sh.secret
        lines += [f"{s.name} = {s.value!r}", f"os.environ[{s.name!r}] = {s.value!r}"]
    return "\n".join(lines) + "\n"


def _shell_text() -> str:
    lines = ["export NCCL_PROTO=LL"]
    for sh in SHAPES:
        s = sh.secret
        lines.append(f"export {s.name}={json.dumps(s.value)}" if sh.single_line else s.value.rstrip("\n"))
        lines.append(" ".join(sh.argv_form()) if sh.single_line else "")
    return "\n".join(lines) + "\n"


def _trace(path: Path) -> None:
    """A Chrome trace (Kineto's shape: "X" events, cat "kernel") whose kernel names carry the secrets."""
    events, ts = [], 0
    for sh in SHAPES:
        s = sh.secret
        name = f"gemm_{s.value}_kernel" if s.self_identifying and sh.single_line else sh.line_form()
        events.append({"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": 5, "pid": 0, "tid": 7,
                       "args": {"device": 0, "stream": 7}})
        ts += 10
    path.write_text(json.dumps({"traceEvents": events}))


class _ServerInfo(BaseHTTPRequestHandler):
    """SGLang 0.5.23's /server_info: ServerArgs fields, launch_command, internal_states (see module doc)."""

    body = b"{}"

    def do_GET(self):  # noqa: N802 (http.server's name)
        if self.path not in ("/server_info", "/get_server_info"):
            self.send_response(404)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


def _server_info() -> bytes:
    args = {"model_path": "/models/m", "tp_size": 1, "attention_backend": "fa3"}
    args.update({sh.secret.name.lower(): sh.secret.value for sh in SHAPES})
    launch = " ".join(["python", "-m", "sglang.launch_server"] + [w for sh in SHAPES for w in sh.argv_form()
                                                                  if sh.single_line])
    return json.dumps({**args, "launch_command": launch, "internal_states": [dict(args)], "version": "0.5.23",
                       "status": "ready"}).encode()


_BENCH = ("import json, sys\n"
          "for line in open(sys.argv[1]).read().splitlines():\n"
          "    print(line)\n"
          "print(json.dumps({'tok_s': 100.0}))\n")


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory):
    """Plant every shape in every place, run every command; returns {place: [shapes planted]}, {output: text}."""
    tmp = tmp_path_factory.mktemp("fuzz")
    planted: Dict[str, List[str]] = {}
    outputs: Dict[str, str] = {}
    every = [sh.secret.shape for sh in SHAPES]
    single = [sh.secret.shape for sh in SHAPES if sh.single_line]

    def cli(name: str, *args, **kw) -> subprocess.CompletedProcess:
        result = run_cli(*args, timeout=300, **kw)
        outputs[f"{name} (stdout+stderr)"] = result.stdout + result.stderr
        return result

    # The inputs: a watched config file, a checkout, a log, a trace, a secrets file the benchmark prints.
    watched = tmp / "server.ini"
    watched.write_text("[server]\nNCCL_PROTO = Simple\n")
    repo = init_repo(tmp / "checkout", {"settings.py": "import os\n", "serve.sh": "export NCCL_PROTO=Simple\n"})
    log = tmp / "server.log"
    log.write_text("h:1:1 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n")
    good, bad = tmp / "good.json", tmp / "bad.json"
    base = ["--timeout", "60", "--watch", watched, "--repo", repo, "--log", log]
    assert cli("capture good", "capture", "-o", good, "--label", "good", *base).returncode == 0, outputs

    watched.write_text(_config_text())
    planted["file text (watched file)"] = every
    (repo / "settings.py").write_text(_python_text())
    (repo / "serve.sh").write_text(_shell_text())
    (repo / "notes.netrc").write_text("\n".join(sh.line_form() for sh in SHAPES) + "\n")
    planted["patches (dirty Python and shell files, untracked file)"] = every
    log.write_text(log.read_text() + "".join(f"2026-01-01 INFO {sh.line_form()}\n" for sh in SHAPES))
    planted["logs"] = every
    trace = tmp / "rank0.trace.json"
    _trace(trace)
    planted["traces (kernel names)"] = every
    secrets_file = tmp / "secrets.txt"
    secrets_file.write_text("\n".join(sh.line_form() for sh in SHAPES) + "\n")

    # A watched process carrying every shape in its environment and command line.
    env = {sh.secret.name: sh.secret.value for sh in SHAPES}
    argv = [w for sh in SHAPES for w in sh.argv_form()]
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", *argv],
                             env={**os.environ, **env})
    # The real probe in a real Python process carrying them too.
    site = tmp / "site"
    site.mkdir()
    assert cli("probe install", "probe", "install", "--site", site).returncode == 0
    records = tmp / "records"
    probed_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probed_env.update(env, ENVSNAP_PROBE_DIR=str(records))
    moddir = tmp / "mods"
    moddir.mkdir()
    hf = next(sh.secret.value for sh in SHAPES if sh.secret.shape == "huggingface_token")
    (moddir / f"plugin_{hf}.py").write_text("X = 1\n")
    probe_code = ("import site, sys; site.addsitedir(sys.argv[1]); sys.path.insert(0, sys.argv[2]); "
                  f"import importlib, os; importlib.import_module('plugin_{hf}'); "
                  + "".join(f"os.environ.get({sh.secret.name!r}); " for sh in SHAPES) + "print('ok')")
    probed = subprocess.run([sys.executable, "-c", probe_code, str(site), str(moddir), *argv], env=probed_env,
                            capture_output=True, text=True, timeout=120)
    assert probed.returncode == 0 and probed.stdout == "ok\n", probed.stderr
    planted["probe records"] = every
    # A real HTTP server answering like SGLang's /server_info.
    handler = type("Handler", (_ServerInfo,), {"body": _server_info()})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}"
    planted["server info"] = every
    try:
        label = "bad\n" + "\n".join(sh.line_form() for sh in SHAPES if sh.single_line)
        planted["labels"] = single
        ran = cli("run", "run", "-o", bad, "--label", label, *base, "--pid", child.pid, "--probe-dir", records,
                  "--sglang-url", url, "--repeat", "1", "--metric", "custom=tok_s.: ([0-9.]+)", "--",
                  sys.executable, "-c", _BENCH, secrets_file, *argv, env=env)
    finally:
        child.kill()
        child.wait()
        httpd.shutdown()
    assert ran.returncode == 0, ran.stderr
    planted["environment (envsnap's own and a watched process's)"] = every
    planted["argv (a watched process, the run command)"] = every
    planted["run messages and output"] = every

    # attach: secret-shaped metric names and the trace.
    names = [f"verify_{sh.secret.value}" for sh in SHAPES
             if sh.secret.self_identifying and _METRIC_NAME.match(sh.secret.value)]
    planted["attach messages (metric names)"] = [sh.secret.shape for sh in SHAPES if sh.secret.self_identifying
                                                 and _METRIC_NAME.match(sh.secret.value)]
    attached = cli("attach", "attach", bad, "--trace", trace, "--steps", "1",
                   *[a for n in names for a in ("--metric", f"{n}=1")])
    assert attached.returncode == 0, attached.stderr

    # Every reader of the snapshots.
    for fmt in ("text", "json"):
        out = cli(f"diff -v --format {fmt}", "diff", good, bad, "-v", "--all", "--format", fmt, "--no-pip-cache")
        assert out.returncode == 1, out.stderr
    report = tmp / "report.html"
    assert cli("report", "report", good, bad, "-o", report, "--no-pip-cache").returncode == 0
    assert cli("show -v", "show", "-v", bad).returncode == 0
    journal = tmp / "bisect.jsonl"
    bisected = cli("bisect", "bisect", good, bad, "--repeat", "1", "--journal", journal, "--", sys.executable, "-c",
                   "import sys; print(open(sys.argv[1]).read()); sys.exit(3)", secrets_file, *argv)
    assert bisected.returncode == 2 and journal.exists(), bisected.stderr  # the benchmark fails: stopped, journaled
    planted["bisect messages and journal"] = every
    planted["outputs (show -v, diff -v text/json, report HTML)"] = every

    # Edited installed files: a package the real pip installed (RECORD with hashes) in a real venv, edited
    # in place between two captures made with that venv's Python, then diffed and reported.
    from helpers.patches import install_package

    python, pkg_site = install_package(tmp / "pkg", "fuzzpkg", {"engine.py": "BLOCK = 64\n"})
    pkg_good, pkg_bad = tmp / "pkg-good.json", tmp / "pkg-bad.json"
    for path in (pkg_good, pkg_bad):
        if path == pkg_bad:
            (pkg_site / "fuzzpkg" / "engine.py").write_text("BLOCK = 128\n" + _python_text())
        made = subprocess.run([str(python), "-m", "envsnap", "capture", "-o", str(path), "--timeout", "60"],
                              capture_output=True, text=True, timeout=300, cwd=str(tmp))
        outputs[f"capture {path.name} (stdout+stderr)"] = made.stdout + made.stderr
        assert made.returncode == 0, made.stderr
    planted["edited installed files"] = every
    out = cli("diff -v (edited installed files)", "diff", pkg_good, pkg_bad, "-v", "--format", "text", "--no-pip-cache")
    assert out.returncode == 1 and "fuzzpkg" in out.stdout, out.stderr
    assert cli("report (edited installed files)", "report", pkg_good, pkg_bad, "-o", tmp / "pkg-report.html",
               "--no-pip-cache").returncode == 0

    inputs = {watched, log, trace, secrets_file}
    for path in sorted(tmp.rglob("*")):
        if path.is_file() and path not in inputs and not {"checkout", "site", "mods", "pkg"} & set(path.relative_to(tmp).parts):
            outputs[f"file {path.relative_to(tmp)}"] = path.read_text(errors="replace")
    return {"planted": planted, "outputs": outputs, "good": good, "bad": bad, "report": report, "tmp": tmp}


def test_every_shape_in_every_place_never_reaches_an_output_in_clear(fuzz):
    planted, outputs = fuzz["planted"], fuzz["outputs"]
    assert len(SHAPES) >= 50 and len(planted) >= 12
    found = {name: _leaks(text) for name, text in outputs.items()}
    in_clear = sum(len(v) for v in found.values())
    total = sum(len(v) for v in planted.values())
    print(f"\nredaction fuzz: {len(SHAPES)} shapes, {len(planted)} places, {total} secrets planted, "
          f"{len(outputs)} outputs searched, {in_clear} found in clear")
    print("outputs: " + "; ".join(sorted(outputs)))
    assert in_clear == 0, {k: v for k, v in found.items() if v}


def test_the_places_really_recorded_what_was_planted(fuzz):
    """No leak must not mean nothing recorded: each place is in the snapshot, redacted."""
    snap = json.loads(fuzz["bad"].read_text())
    sections = snap["sections"]
    for name in ("env", "processes", "files", "git", "probe", "sglang", "nccl"):
        assert sections.get(name, {}).get("status") == "ok", (name, sections.get(name, {}).get("status"))
    edited = json.loads((fuzz["tmp"] / "pkg-bad.json").read_text())["sections"]["packages"]["data"]
    record = edited["integrity"]["modified"]["fuzzpkg/engine.py"]["content"]
    assert record["status"] == "text" and record["redacted"] is True and "BLOCK = 128" in record["text"]
    assert "redacted:" in snap["label"] and snap["runs"][0]["ok"] is True
    text = json.dumps(sections)
    assert text.count("redacted:") > 10 * len(SHAPES)
    assert "NCCL_PROTO" in fuzz["report"].read_text()
    assert any("redacted:" in name for name in snap["runs"][-1]["metrics"])  # the attached metric names
    probe = fuzz["tmp"] / "records"
    files = [p for p in probe.iterdir() if p.is_file()]
    assert files and all(p.stat().st_mode & 0o077 == 0 for p in files)


def test_bisect_never_prints_a_secret_it_applies(tmp_path):
    """Issue 36: `bisect` printed `export ADMIN_PW=<value>` in its undo/only commands. Snapshots written
    with --no-redact (or by a version that did not know the name) hold the value; bisect still applies it
    (that is the point), and says which variable and fingerprint, never the value."""
    from helpers.bench import base_env, bench_cmd, capture

    good_pw, bad_pw = "g" + _gen("fuzz-bisect-good", 19), "b" + _gen("fuzz-bisect-bad", 19)
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    capture(good, base_env(ADMIN_PW=good_pw), extra_args=["--no-redact"])
    capture(bad, base_env(ADMIN_PW=bad_pw), extra_args=["--no-redact"])
    assert bad_pw in bad.read_text()  # held in clear: the case this test is about
    for fmt in ("text", "json"):
        result = run_cli("bisect", good, bad, "--repeat", "1", "--format", fmt, "--journal", tmp_path / f"{fmt}.jsonl",
                         "--", *bench_cmd("env", "--slow", f"ADMIN_PW={bad_pw}:0.5"), env={"ADMIN_PW": ""})
        assert result.returncode == 0, result.stderr
        assert "ADMIN_PW" in result.stdout
        out = result.stdout + result.stderr + (tmp_path / f"{fmt}.jsonl").read_text()
        for secret in (good_pw, bad_pw):
            assert secret not in out and secret[-10:] not in out, out
        if fmt == "text":
            assert "export ADMIN_PW=...  # the snapshot's value (redacted:" in result.stdout
