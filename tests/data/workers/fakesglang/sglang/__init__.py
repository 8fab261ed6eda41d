"""A stand-in package so that `python -m sglang.launch_server` runs tests/data/workers' launcher.

Only for envsnap's tests (on PYTHONPATH in the launcher's environment); no SGLang code.
"""
