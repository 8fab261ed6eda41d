"""Secrets corpus: >= 30 credential shapes must not survive anywhere envsnap writes or prints.

The corpus (helpers.hardening.CORPUS) holds cloud keys (AWS, GCP, Azure), tokens of the
hosting and ML services (Hugging Face, OpenAI, Anthropic, GitHub, GitLab, Slack, Stripe,
npm, PyPI, W&B, ...), JWTs, PEM blocks, URLs and headers with credentials, and secrets
that only their name or flag gives away. Each is checked in the library (every context:
env var, argv, free text, JSON string) and then end to end: a real `envsnap capture` with
all of them in its environment, in a watched process's command line, in watched file
names, a label, a log and a URL; the probe's record files; `envsnap run` records; the
bisect journal; `show`, `report` (HTML) and `diff` output; error messages. And in file text
(patches, working copies, stash entries, watched files, start-up hooks): every shape pasted into
source code, shell, YAML, .env and JSON, through a real capture of a real git checkout to every output.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers.hardening import (
    CORPUS,
    PERF_ARGV,
    PERF_VARS,
    SELF_IDENTIFYING,
    find_leaks,
    run_cli,
    secret_argv,
    secret_env,
    walk_strings,
)
from hypothesis import HealthCheck, given, settings, strategies as st

from envsnap import redact
from envsnap.model import store


def test_corpus_covers_at_least_30_shapes_of_each_required_kind():
    shapes = {s.shape for s in CORPUS}
    assert len(shapes) >= 30 and len(SELF_IDENTIFYING) >= 30
    for needed in ("aws_access_key_id", "gcp_api_key", "azure_storage_connection_string", "huggingface_token",
                   "openai_project_key", "anthropic_key", "github_classic_pat", "gitlab_pat", "slack_bot_token",
                   "stripe_live_secret", "npm_token", "pypi_token", "wandb_api_key", "jwt", "pem_rsa_private_key",
                   "url_postgres_password", "generic_api_key_flag", "password_env", "gcp_service_account_json"):
        assert needed in shapes, needed


def _contexts(s):
    """(context name, redacted output) for every place a value of this shape can sit."""
    out = {
        "env_own_name": json.dumps(redact.redact_env({s.name: s.value})),
        "json_own_key": redact.redact_text(json.dumps({s.name: s.value})),
        "json_in_json": redact.redact_text(json.dumps({"args": json.dumps({s.name: s.value})})),
        "python_repr": redact.redact_text(repr({s.name: s.value})),
        "shell_assignment": redact.redact_text(f"env {s.name}='{s.value}' ./serve"),
        "scrub_nested": json.dumps(redact.scrub({"a": [{"b": {s.name: s.value}}]})),
        "scrub_list_under_name": json.dumps(redact.scrub({s.name: [s.value]})),
    }
    if "\n" not in s.value:
        out["shell_export"] = redact.redact_text(f"export {s.name}={s.value}")
        out["yaml_line"] = redact.redact_text(f"{s.name.lower()}: {s.value}")
    if s.flag:
        out["argv_flag_space"] = json.dumps(redact.redact_argv(["serve", s.flag, s.value, "--port", "1"]))
        out["argv_flag_equals"] = json.dumps(redact.redact_argv(["serve", f"{s.flag}={s.value}"]))
        out["text_flag"] = redact.redact_text(f"serve {s.flag} {s.value} --port 1")
        out["scrub_argv_list"] = json.dumps(redact.scrub({"cmdline": ["serve", s.flag, s.value]}))
    if s.self_identifying:
        out["env_neutral_name"] = json.dumps(redact.redact_env({"SOME_SETTING": s.value}))
        out["free_text"] = redact.redact_text(f"2026-01-01 INFO using {s.value} for upload")
        out["json_neutral_key"] = redact.redact_text(json.dumps({"value": s.value}))
        out["argv_bare"] = json.dumps(redact.redact_argv(["serve", s.value]))
        out["scrub_key"] = json.dumps(redact.scrub({f"/data/{s.value}": {"size": 1}}))
    return out


@pytest.mark.parametrize("secret", CORPUS, ids=[s.shape for s in CORPUS])
def test_every_shape_is_redacted_in_every_context(secret):
    for context, output in _contexts(secret).items():
        assert not secret.leaked_in(output), f"{secret.shape} survives in {context}: {output[:200]}"
        assert "redacted:" in output, context


def _file_contexts(s):
    """(context, text of a file) for every way a secret gets pasted into a file or a patch."""
    value, single = s.value, "\n" not in s.value
    python = [f"{s.name} = {value!r}", f"os.environ[{s.name!r}] = {value!r}",
              f"os.environ.setdefault({s.name!r}, {value!r})", f"cfg = {{{s.name.lower()!r}: {value!r}}}"]
    if s.flag:
        python.append(f"subprocess.run(['serve', {s.flag!r}, {value!r}])")
    if single:
        python.append(f"# run with {s.name}={value}")
        if s.flag:
            python.append(f"subprocess.run(['serve', '{s.flag}={value}'])")
    if s.self_identifying:
        python.append(f"x = {value!r}")
    out = {f"python_{i}": ("cfg.py", f"import os\n{line}\n") for i, line in enumerate(python)}
    if single:
        out.update({"shell_export": ("env.sh", f"export {s.name}='{value}'\n"), "dotenv": (".env", f"{s.name}={value}\n"),
                    "yaml": ("c.yaml", f"{s.name.lower()}: {value}\n")})
        if s.flag:
            out["shell_flag"] = ("serve.sh", f"serve {s.flag} {value} --port 1\n")
    out["json"] = ("c.json", json.dumps({s.name: value}, indent=1) + "\n")
    added = "+" + f"export {s.name}='{value}'".replace("\n", "\n+")
    out["patch"] = ("x.sh", f"--- a/x.sh\n+++ b/x.sh\n@@ -0,0 +1 @@\n{added}\n")
    return out


@pytest.mark.parametrize("secret", CORPUS, ids=[s.shape for s in CORPUS])
def test_every_shape_is_redacted_in_file_text(secret):
    for context, (path, text) in _file_contexts(secret).items():
        output = redact.redact_file_text(text, path)
        assert not secret.leaked_in(output), f"{secret.shape} survives in {context}: {output[:300]}"
        assert redact.redact_file_text(output, path) == output, context  # idempotent


def test_performance_variables_and_server_arguments_stay_visible():
    assert redact.redact_env(PERF_VARS) == PERF_VARS
    assert redact.scrub({"vars": PERF_VARS}) == {"vars": PERF_VARS}
    assert redact.redact_argv(PERF_ARGV) == PERF_ARGV
    for name in PERF_VARS:
        assert not redact.is_secret_name(name), name
    # SGLang server_args whose names hold "token" or "key" but are not credentials.
    args = {"speculative_token_map": "/m/map.pt", "bucket_inter_token_latency": "0.1", "max_total_tokens": "8",
            "tokenizer_path": "/m", "skip_tokenizer_init": "false", "pad_token_id": "0", "parent_key": "sglang-main",
            "sort_key": "name"}
    assert redact.scrub(args) == args
    # ... while those that are credentials go.
    for name in ("api_key", "admin_api_key", "ssl_keyfile_password", "KAGGLE_KEY", "MYSQL_PWD", "sig", "AccountKey"):
        assert redact.is_secret_name(name), name


_filler = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.sampled_from(CORPUS).map(lambda s: s.value), _filler), max_size=6),
       st.sampled_from([" ", "\n", "=", ": ", "&", ",", '"', "'", "/", ":", "@", "?", ";", "\t", "|", "-", "+", ".",
                        "#", "%", "~", "(", ")", "<", ">", "[", "]", "{", "}", "!", "*", "\\", "$"]))
def test_redaction_is_idempotent_and_complete_on_mixed_text(parts, sep):
    text = sep.join(parts)
    once = redact.redact_text(text)
    assert redact.redact_text(once) == once  # a saved snapshot re-saved (attach, merge) is unchanged
    present = [s for s in SELF_IDENTIFYING if s.value in parts]
    if present:
        assert not find_leaks(once, present), text
    tree = {"k": parts, "v": {"HF_TOKEN": text, "x": text}}
    assert redact.scrub(redact.scrub(tree)) == redact.scrub(tree)


def _check_clean(label, text):
    leaks = find_leaks(text)
    assert not leaks, f"{label}: {leaks}"


@pytest.fixture(scope="module")
def hostile_capture(tmp_path_factory):
    """A real capture with the whole corpus in its environment, a watched process's argv,
    watched file names, the label and an NCCL log; and the refusal of an SGLang URL holding one."""
    tmp = tmp_path_factory.mktemp("secrets")
    watch = tmp / "watched"
    watch.mkdir()
    for s in SELF_IDENTIFYING:
        if "/" not in s.value and "\n" not in s.value and len(s.value) < 200:
            (watch / f"{s.value}.bin").write_text("x")
    (watch / "server.json").write_text(json.dumps({s.name: s.value for s in CORPUS}))
    log = tmp / "server.log"
    log.write_text("h:1:1 [0] NCCL INFO NCCL_PROTO set by environment to Simple\n"
                   + "".join(f"h:1:1 [0] NCCL INFO {s.name} set by environment to {s.value}\n"
                             for s in CORPUS if "\n" not in s.value))
    env = {**secret_env(), **PERF_VARS}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", *secret_argv()],
                             env={**os.environ, **env})
    try:
        out = tmp / "snap.json"
        result = run_cli("capture", "-o", out, "--timeout", "30", "--label", f"run with {CORPUS[0].value}",
                         "--pid", child.pid, "--watch", watch, "--log", log, env=env)
    finally:
        child.kill()
        child.wait()
    assert result.returncode == 0, result.stderr
    # A URL carrying credentials is refused before the capture starts (one line, exit 2): that line too.
    refused = run_cli("capture", "-o", tmp / "refused.json", "--timeout", "30",
                      "--sglang-url", f"http://admin:{CORPUS[-1].value}@127.0.0.1:9", env=env)
    assert refused.returncode == 2 and not (tmp / "refused.json").exists(), refused.stderr
    return {"tmp": tmp, "snap": out, "capture": result, "refused": refused, "env": env, "watch": watch}


@pytest.mark.slow
def test_capture_file_and_its_stderr_hold_no_secret(hostile_capture):
    text = hostile_capture["snap"].read_text()
    _check_clean("snapshot file", text)
    _check_clean("capture stderr/stdout", hostile_capture["capture"].stderr + hostile_capture["capture"].stdout)
    _check_clean("refused URL's stderr/stdout", hostile_capture["refused"].stderr + hostile_capture["refused"].stdout)
    snap = store.load(str(hostile_capture["snap"]))
    _check_clean("decoded strings", "\n".join(walk_strings(snap)))
    sections = snap["sections"]
    # Every place a secret went in was really captured (so "no leak" is not "nothing recorded").
    assert sections["env"]["status"] == "ok" and sections["processes"]["status"] == "ok"
    assert sections["files"]["status"] == "ok" and sections["nccl"]["status"] == "ok"
    env_vars = sections["env"]["data"]["vars"]
    for s in CORPUS:
        assert env_vars[s.name].startswith("redacted:") or "redacted:" in env_vars[s.name], s.shape
    for name, value in PERF_VARS.items():
        assert env_vars[name] == value, name
    cmdlines = [p.get("cmdline") for p in sections["processes"]["data"]["processes"].values()]
    assert any(c and "time.sleep(120)" in " ".join(c) for c in cmdlines)
    assert len(sections["files"]["data"]["entries"]) >= 30
    assert "redacted:" in snap["label"]


@pytest.mark.slow
def test_show_and_report_output_hold_no_secret(hostile_capture, tmp_path):
    shown = run_cli("show", "-v", hostile_capture["snap"])
    assert shown.returncode == 0 and "env" in shown.stdout
    _check_clean("show -v", shown.stdout + shown.stderr)
    # A second snapshot that differs: the secrets rotated (still redacted), a perf var changed.
    snap = store.load(str(hostile_capture["snap"]))
    env_vars = snap["sections"]["env"]["data"]["vars"]
    env_vars["NCCL_PROTO"] = "LL128"
    env_vars["HF_TOKEN"] = redact.fingerprint("rotated")
    bad = tmp_path / "bad.json"
    store.save(snap, str(bad))
    html = tmp_path / "r.html"
    rep = run_cli("report", hostile_capture["snap"], bad, "-o", html)
    assert rep.returncode == 0, rep.stderr
    page = html.read_text()
    assert "NCCL_PROTO" in page
    _check_clean("report html", page + rep.stderr + rep.stdout)
    for fmt in ("text", "json", "html"):
        d = run_cli("diff", hostile_capture["snap"], bad, "--format", fmt, "--all", "-v")
        assert d.returncode == 1, d.stderr  # they differ
        assert "NCCL_PROTO" in d.stdout
        _check_clean(f"diff --format {fmt}", d.stdout + d.stderr)
    third = tmp_path / "third.json"
    store.save(snap, str(third))
    ranked = run_cli("rank", hostile_capture["snap"], bad, third)
    _check_clean("rank", ranked.stdout + ranked.stderr)
    merged = run_cli("merge", hostile_capture["snap"], "-o", "-")
    assert merged.returncode == 0, merged.stderr
    _check_clean("merge", merged.stdout + merged.stderr)


@pytest.mark.slow
def test_probe_record_files_and_their_capture_hold_no_secret(tmp_path):
    """The real probe, activated the way its .pth line does it, in a process carrying the corpus."""
    site = tmp_path / "site"
    site.mkdir()
    installed = run_cli("probe", "install", "--site", site)
    assert installed.returncode == 0, installed.stderr
    records = tmp_path / "records"
    code = ("import site, sys; site.addsitedir(sys.argv[1]); import os; "
            f"os.environ['LATE_SECRET'] = {CORPUS[11].value!r}; print('ok')")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(secret_env())
    env["ENVSNAP_PROBE_DIR"] = str(records)
    child = subprocess.run([sys.executable, "-c", code, str(site), *secret_argv()], env=env,
                           capture_output=True, text=True, timeout=60)
    assert child.returncode == 0 and child.stdout == "ok\n", child.stderr
    files = sorted(records.glob("*.json"))
    assert files, "the probe wrote no record"
    for path in files:
        text = path.read_text()
        _check_clean(f"probe record {path.name}", text)
        record = json.loads(text)
        assert record["env_at_start"]["HF_TOKEN"].startswith("redacted:")
        assert record["env_at_exit"]["LATE_SECRET"].startswith("redacted:")
    out = tmp_path / "snap.json"
    cap = run_cli("capture", "-o", out, "--probe-dir", records, "--timeout", "30")
    assert cap.returncode == 0, cap.stderr
    snap = json.loads(out.read_text())
    assert snap["sections"]["probe"]["status"] == "ok" and snap["sections"]["probe"]["data"]["records"]
    _check_clean("snapshot with probe records", out.read_text())


_BENCH = ("import json, sys; print('\\n'.join(sys.argv[1:])); "
          "print('HF_TOKEN=' + sys.argv[1] + ' url https://u:' + sys.argv[2] + '@h/x'); "
          "print(json.dumps({'tok_s': 100.0, 'api_key': sys.argv[3]}))")


@pytest.mark.slow
def test_run_records_progress_and_bisect_journal_hold_no_secret(tmp_path):
    values = [s.value for s in SELF_IDENTIFYING if "\n" not in s.value]
    bench = [sys.executable, "-c", _BENCH, *values, *secret_argv()]
    out = tmp_path / "run.json"
    ran = run_cli("run", "-o", out, "--repeat", "2", "--metric", "custom=tok_s.: ([0-9.]+)", "--", *bench,
                  env=secret_env(neutral=False))
    assert ran.returncode == 0, ran.stderr
    _check_clean("run stderr", ran.stderr + ran.stdout)
    text = out.read_text()
    _check_clean("run snapshot", text)
    snap = json.loads(text)
    assert [r["ok"] for r in snap["runs"]] == [True, True]
    assert "redacted:" in snap["runs"][0]["output_tail"] and "redacted:" in " ".join(snap["runs"][0]["command"])
    # bisect: a benchmark that fails while printing secrets -> journal and output stay clean.
    bad = tmp_path / "bad.json"
    data = store.load(str(out))
    data["sections"]["env"]["data"]["vars"]["NCCL_PROTO"] = "LL128"
    store.save(data, str(bad))
    journal = tmp_path / "j.jsonl"
    failing = [sys.executable, "-c", "import sys; print(' '.join(sys.argv[1:])); sys.exit(3)", *values]
    bis = run_cli("bisect", out, bad, "--repeat", "1", "--journal", journal, "--", *failing)
    assert bis.returncode == 2, bis.stderr
    _check_clean("bisect output", bis.stdout + bis.stderr)
    assert journal.exists()
    _check_clean("bisect journal", journal.read_text())


@pytest.mark.slow
def test_error_messages_hold_no_secret(tmp_path):
    hf = next(s for s in CORPUS if s.shape == "huggingface_token")
    gh = next(s for s in CORPUS if s.shape == "github_classic_pat")
    # A path holding a token.
    missing = run_cli("show", tmp_path / f"{hf.value}.json")
    assert missing.returncode == 2 and "no such file" in missing.stderr
    _check_clean("show error", missing.stderr)
    # A --no-redact snapshot with a bad field quoting a secret: the one-line rejection stays clean.
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": 1, "sections": {}, "redaction": "off",
                               "runs": [{"metrics": {"tok_s": f"{gh.value}"}}]}))
    shown = run_cli("show", bad)
    assert shown.returncode == 2 and len(shown.stderr.strip().splitlines()) == 1
    _check_clean("validation error", shown.stderr)
    # A bad option value.
    opt = run_cli("run", "-o", tmp_path / "x.json", "--metric", f"{hf.value}=(unclosed", "--", "true")
    assert opt.returncode == 2 and len(opt.stderr.strip().splitlines()) == 1
    _check_clean("option error", opt.stderr)


def test_real_outputs_pass_through_unchanged():
    """No false positives on what envsnap really reads: SGLang bench_serving / one_batch_server
    output and server logs (tests/data/runs), NCCL INFO logs, nvidia-smi output and the NVML dump
    of a real H200 (tests/data/nvidia, copied from the project's H200 reference outputs). Before: `#new-token: 1024`
    and `Inter-Token Latency----` lost their numbers to redaction."""
    from helpers.hardening import REPO_ROOT

    roots = [REPO_ROOT / "tests" / "data"]
    checked = 0
    for root in roots:
        for path in sorted(root.rglob("*")) if root.exists() else []:
            if not path.is_file() or path.stat().st_size > 3_000_000:
                continue
            if "golden" in path.relative_to(root).parts:
                continue  # envsnap's own outputs (tests/e2e/test_golden.py), not what it reads
            text = path.read_text(errors="replace")
            assert redact.redact_text(text) == text, path
            checked += 1
    assert checked >= 5


def _pasted(corpus, style):
    """A config file with the whole corpus pasted in (style: sh | py)."""
    lines = []
    for s in corpus:
        if style == "py":
            lines.append(f"os.environ[{s.name!r}] = {s.value!r}")
        elif "\n" not in s.value:
            lines.append(f"export {s.name}='{s.value}'")
        else:
            lines.append(s.value.rstrip("\n"))  # a PEM block pasted as is
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def patch_pair(tmp_path_factory):
    """Two real captures of a real checkout: clean, then with the corpus pasted into a dirty file, a
    stash entry, an untracked file, a watched file and a sitecustomize.py on the interpreter's path."""
    from helpers.git import git, init_repo

    tmp = tmp_path_factory.mktemp("patch-secrets")
    repo = init_repo(tmp / "checkout", {"serve.sh": "export NCCL_PROTO=Simple\n", "settings.py": "import os\n"})
    watched = tmp / "launch.env"
    watched.write_text("NCCL_PROTO=Simple\n")
    hooks = tmp / "hooks"
    hooks.mkdir()
    env = {"PYTHONPATH": str(hooks)}
    snaps = {}
    for side in ("good", "bad"):
        if side == "bad":
            (repo / "settings.py").write_text("import os\n" + _pasted(CORPUS, "py"))
            git(repo, "stash", "push", "-q", "-m", "keys", "settings.py")
            (repo / "serve.sh").write_text("export NCCL_PROTO=LL\n" + _pasted(CORPUS, "sh"))
            (repo / "settings.py").write_text("import os\n" + _pasted(CORPUS[::-1], "py"))
            (repo / "notes.env").write_text(_pasted(CORPUS, "sh"))
            watched.write_text("NCCL_PROTO=LL\n" + _pasted(CORPUS, "sh"))
            (hooks / "sitecustomize.py").write_text("import os\n" + _pasted(CORPUS, "py"))
        snaps[side] = tmp / f"{side}.json"
        cap = run_cli("capture", "-o", snaps[side], "--repo", repo, "--watch", watched, "--timeout", "60",
                      env=env, cwd=str(tmp))
        assert cap.returncode == 0, cap.stderr
        _check_clean(f"capture of {side}", cap.stdout + cap.stderr)
    return {**snaps, "repo": repo.resolve(), "hooks": hooks, "watched": watched, "tmp": tmp}


@pytest.mark.slow
def test_secrets_pasted_into_files_stay_out_of_snapshots_diffs_and_reports(patch_pair):
    bad_text = patch_pair["bad"].read_text()
    _check_clean("snapshot with patches", bad_text)
    bad = store.load(str(patch_pair["bad"]))
    sections = bad["sections"]
    repo = sections["git"]["data"]["repos"][str(patch_pair["repo"])]
    held = [repo["dirty"]["serve.sh"]["patch"], repo["dirty"]["serve.sh"]["content"],
            repo["dirty"]["settings.py"]["patch"], repo["dirty"]["settings.py"]["content"],
            repo["untracked"]["notes.env"]["content"], repo["stash"]["stash@{0}"]["patch"],
            sections["files"]["data"]["entries"][str(patch_pair["watched"])]["content"],
            sections["python"]["data"]["startup_hooks"][str(patch_pair["hooks"] / "sitecustomize.py")]["content"]]
    for record in held:  # really captured as text (so "no leak" is not "nothing recorded"), and redacted
        assert record["status"] == "text" and record["redacted"] is True and "redacted:" in record["text"], record
    assert "export NCCL_PROTO=LL" in repo["dirty"]["serve.sh"]["content"]["text"]  # the rest stays readable
    good, bad_path = patch_pair["good"], patch_pair["bad"]
    for fmt in ("text", "json", "html"):
        out = run_cli("diff", good, bad_path, "--format", fmt, "-v", "--no-pip-cache")
        assert out.returncode == 1, out.stderr
        assert "NCCL_PROTO=LL" in out.stdout  # the patches are there
        _check_clean(f"diff --format {fmt} with patches", out.stdout + out.stderr)
    html = patch_pair["tmp"] / "patches.html"
    rep = run_cli("report", good, bad_path, "-o", html, "--no-pip-cache")
    assert rep.returncode == 0, rep.stderr
    page = html.read_text()
    assert 'id="patches"' in page
    _check_clean("report with patches", page + rep.stderr)
    shown = run_cli("show", "-v", bad_path)
    _check_clean("show -v with patches", shown.stdout + shown.stderr)
