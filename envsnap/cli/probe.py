"""`envsnap probe install|uninstall|status`: the in-process probe (a .pth start-up hook)."""
from __future__ import annotations

import click

_SITE_HELP = "site-packages directory of the Python that runs the server (default: this Python's)."
_PYTHON_HELP = "the server's Python interpreter: its site-packages is used (instead of --site)."


def _site(site, python):
    from envsnap.errors import EnvsnapError
    from envsnap.probe import install as install_mod

    if site and python:
        raise EnvsnapError("give --site or --python, not both")
    return install_mod.site_of(python) if python else site


def _site_options(func):
    func = click.option("--python", "python", type=click.Path(dir_okay=False), help=_PYTHON_HELP)(func)
    return click.option("--site", type=click.Path(file_okay=False), help=_SITE_HELP)(func)


@click.group()
def probe() -> None:
    """Manage the in-process probe: a start-up hook that records os.environ inside every worker.

    \b
    The hook is off (one environment lookup per Python start) until ENVSNAP_PROBE_DIR is set:
      envsnap probe install --python /path/to/server-venv/bin/python   (or --site DIR)
      ENVSNAP_PROBE_DIR=/tmp/probe python -m sglang.launch_server ...
      envsnap capture --sglang --probe-dir /tmp/probe -o snap.json
    """


@probe.command("install")
@_site_options
def probe_install_cmd(site, python) -> None:
    """Write the hook into a site-packages directory (idempotent)."""
    from envsnap.probe import install as install_mod

    result = install_mod.install(_site(site, python))
    if result["changed"]:
        click.echo(f"installed the envsnap probe in {result['site']} ({', '.join(result['changed'])}); "
                   "it stays off until ENVSNAP_PROBE_DIR is set")
    else:
        click.echo(f"the envsnap probe is already installed in {result['site']}")


@probe.command("uninstall")
@_site_options
def probe_uninstall_cmd(site, python) -> None:
    """Remove the hook's files (only files envsnap wrote; idempotent)."""
    from envsnap.probe import install as install_mod

    result = install_mod.uninstall(_site(site, python))
    if result["removed"]:
        click.echo(f"removed the envsnap probe from {result['site']} ({', '.join(result['removed'])})")
    else:
        click.echo(f"the envsnap probe is not installed in {result['site']}")
    for name in result["skipped"]:
        click.echo(f"kept {name}: not written by envsnap", err=True)


@probe.command("status")
@_site_options
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
def probe_status_cmd(site, python, as_json) -> int:
    """Say whether the hook is installed and current. Exit 0 when it is, 1 when not."""
    from envsnap.probe import install as install_mod

    result = install_mod.status(_site(site, python))
    if as_json:
        import json

        click.echo(json.dumps(result, sort_keys=True, indent=1))
    else:
        if result["installed"]:
            state = "installed" + ("" if result["current"] else " but stale (run `envsnap probe install` again)")
        elif result["partial"]:
            state = "partly installed (run `envsnap probe install` or `uninstall`)"
        else:
            state = "not installed"
        click.echo(f"envsnap probe: {state} in {result['site']}")
        for name, file_state in sorted(result["files"].items()):
            click.echo(f"  {name}: {file_state}")
        if result["probe_dir"]:
            click.echo(f"  ENVSNAP_PROBE_DIR={result['probe_dir']} here: Python processes started from this shell write records")
        else:
            click.echo("  ENVSNAP_PROBE_DIR is not set here: the hook is off in this shell")
    return 0 if result["installed"] and result["current"] else 1
