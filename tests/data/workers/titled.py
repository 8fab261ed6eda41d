"""A process that titles itself like an SGLang scheduler, then waits: for /proc environ tests.

`python titled.py TITLE`: calls setproctitle (as sglang's scheduler.py does), prints
"TITLED <pid>", exits when stdin closes (or after 120 s).
"""
import os
import sys
import threading

import setproctitle

setproctitle.setproctitle(sys.argv[1])
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
print("TITLED", os.getpid(), flush=True)
done.wait(120)
