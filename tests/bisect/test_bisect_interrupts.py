"""bisect's signal handling in this very process (real signals, sent with os.kill): the first signal stops
the bisect, no signal cuts a restore short, and a second one waits, is reported, and is not acted on."""
from __future__ import annotations

import os
import signal

import pytest

from envsnap.bisect import interrupts


@pytest.mark.parametrize("signum", interrupts.SIGNALS)
def test_a_signal_raises_interrupted_with_its_exit_status(signum):
    guard = interrupts.Guard().install()
    try:
        with pytest.raises(interrupts.Interrupted) as caught:
            os.kill(os.getpid(), signum)
            for _ in range(1000):  # the handler runs between bytecodes
                pass
        assert caught.value.signum == signum
        assert caught.value.exit_code == (130 if signum == signal.SIGINT else 128 + signum)
    finally:
        guard.uninstall()


def test_a_signal_during_a_restore_waits_for_its_end_and_a_second_one_is_reported_not_acted_on():
    previous = signal.getsignal(signal.SIGTERM)
    guard = interrupts.Guard().install()
    steps = []
    try:
        with pytest.raises(interrupts.Interrupted) as caught:
            with interrupts.held():
                os.kill(os.getpid(), signal.SIGTERM)
                for i in range(3):  # the restore's work, uninterrupted
                    steps.append(i)
            steps.append("after")  # not reached: the signal that waited is acted on as the block ends
        assert steps == [0, 1, 2] and caught.value.signum == signal.SIGTERM
        # The first signal blocked the others: a second Ctrl-C now waits (the unwinding restores files).
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            pass
        assert guard.uninstall() == ["SIGINT"]
    finally:
        guard.uninstall()
    assert signal.getsignal(signal.SIGTERM) == previous  # the previous handlers are back
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # and nothing stays blocked


def test_without_a_signal_held_changes_nothing():
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with interrupts.held():
        assert set(interrupts.SIGNALS) <= signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before
