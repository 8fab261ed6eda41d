"""STAND-IN for sglang/srt/managers/scheduler.py, written for envsnap's illustrative example.

Not SGLang's code: a short text of envsnap's own (see snapshots/illustrative-src/README.md) that
keeps only the facts the example's story rests on, from sglang 0.5.5 sglang/srt/managers/scheduler.py:
- run_scheduler_process (line 2748) is the target of each TP worker process: it sets the process
  title `sglang::scheduler_TP<rank>` (line 2773), builds a Scheduler, reports "ready" through its pipe
  and runs the event loop;
- Scheduler.event_loop_normal (line 958) takes the next batch, runs it (run_batch) and processes its
  result (process_batch_result), or checks itself while idle (self_check_during_idle);
- Scheduler.forward_ct counts the forward passes (line 429).
"""
import logging
import os
import time

import setproctitle

logger = logging.getLogger(__name__)


class Scheduler:
    """One per TP rank: receives requests, forms batches and runs them on its GPU."""

    def __init__(self, server_args, tp_rank):
        self.server_args = server_args
        self.tp_rank = tp_rank
        self.forward_ct = 0
        self.waiting_queue = []
        self.cur_batch = None
        self.last_batch = None

    def event_loop_normal(self):
        """One batch at a time: schedule, run, then process its result."""
        while True:
            self.process_input_requests(self.recv_requests())
            batch = self.get_next_batch_to_run()
            self.cur_batch = batch

            if batch:
                result = self.run_batch(batch)
                self.process_batch_result(batch, result)
            else:
                self.self_check_during_idle()  # nothing to run: verify the memory pools

            self.last_batch = batch

    def run_batch(self, batch):
        self.forward_ct += 1
        return self.model_worker.forward_batch_generation(batch)


def run_scheduler_process(server_args, tp_rank, pipe_writer):
    """The body of one TP worker process (spawned by engine.py's _launch_subprocesses)."""
    setproctitle.setproctitle(f"sglang::scheduler_TP{tp_rank}")
    logger.info("scheduler TP%d in process %d", tp_rank, os.getpid())
    started = time.perf_counter()
    scheduler = Scheduler(server_args, tp_rank)
    pipe_writer.send({"status": "ready", "load_s": time.perf_counter() - started})
    scheduler.event_loop_normal()
