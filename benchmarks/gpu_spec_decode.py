#!/usr/bin/env python3
"""A small speculative-decoding loop that behaves like EAGLE-3 decoding, for envsnap's GPU checks.

A target transformer and a draft that is a truncated copy of it (its first few blocks,
sharing the target's embeddings, final norm and LM head, the way an EAGLE draft head
reuses the target's embeddings and head) run the classic greedy draft-then-verify cycle:

  1. the draft proposes k tokens, one small forward each;
  2. the target scores all k in ONE forward (the verify step) and keeps the longest prefix
     that matches its own greedy choice, plus one token of its own (the "bonus" token).

Weights are random with a fixed seed, so every run of the same configuration on the same
device produces the same tokens and the same accept length; the output is, by
construction, identical to the target's plain greedy decoding (`--check` proves it).
Random weights would make a draft either always or never agree, so the residual branches
of the target are scaled (`--res-scale`): the blocks the draft lacks nudge the target's
choice away from the draft's often enough that acceptance is high but not 100%.

No KV cache: each forward re-reads the whole sequence. That keeps the code short while the
cost structure stays realistic: the verify forward (all target blocks) dominates a cycle,
and a cycle is hundreds of small kernel launches, so what slows launches
(CUDA_LAUNCH_BLOCKING=1) or allocations (PYTORCH_NO_CUDA_MEMORY_CACHING=1) really slows it.

Output: progress lines, then ONE final line holding a JSON object of numbers, which
envsnap's "final JSON object line" parser reads (EAGLE-3 roles: output_throughput is the
throughput, accept_length the accepted tokens per cycle incl. the bonus token, as
SGLang's avg_spec_accept_length counts them, cycle_ms the time of one draft+verify cycle).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16}


class Block(nn.Module):
    """Pre-norm transformer block; residual branches scaled so later blocks nudge, not rewrite."""

    def __init__(self, dim: int, heads: int, ffn_mult: int, res_scale: float) -> None:
        super().__init__()
        self.heads = heads
        self.res_scale = res_scale
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.ln2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, ffn_mult * dim, bias=False)
        self.down = nn.Linear(ffn_mult * dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.res_scale * self.proj(att.transpose(1, 2).reshape(b, t, c))
        return x + self.res_scale * self.down(F.gelu(self.up(self.ln2(x))))


class LM(nn.Module):
    """Token + absolute position embeddings, blocks, final norm, an untied LM head.

    Untied on purpose: with a random tied head, greedy decoding just repeats the last token.
    Absolute positions keep the greedy sequence from falling into a short loop.
    """

    def __init__(self, vocab: int, dim: int, max_pos: int, blocks: List[Block],
                 shared: Optional["LM"] = None) -> None:
        super().__init__()
        if shared is None:
            self.tok = nn.Embedding(vocab, dim)
            self.pos = nn.Embedding(max_pos, dim)
            self.ln_f = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, vocab, bias=False)
        else:  # the draft shares the target's embeddings, final norm and head (no copies)
            self.tok, self.pos, self.ln_f, self.head = shared.tok, shared.pos, shared.ln_f, shared.head
        self.blocks = nn.ModuleList(blocks)

    def forward(self, ids: torch.Tensor, last_n: int) -> torch.Tensor:
        """Logits of the last `last_n` positions only (as serving engines compute them)."""
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.tok(ids) + self.pos(positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x[:, -last_n:]))


def build_models(args: argparse.Namespace, device: torch.device, dtype: torch.dtype) -> Tuple[LM, LM]:
    """Target and draft with fixed-seed random weights; the draft = the target's first blocks (+ optional noise)."""
    torch.manual_seed(args.seed)
    max_pos = args.prompt_len + args.steps * (args.k + 1) + args.k + 2
    with torch.device(device):  # initialise on the device: no slow CPU init + copy of big weights
        blocks = [Block(args.dim, args.heads, args.ffn_mult, args.res_scale) for _ in range(args.layers)]
        target = LM(args.vocab, args.dim, max_pos, blocks)
        draft_blocks = [Block(args.dim, args.heads, args.ffn_mult, args.res_scale) for _ in range(args.draft_layers)]
        for src, dst in zip(blocks, draft_blocks):
            dst.load_state_dict(src.state_dict())
            if args.draft_noise > 0:
                with torch.no_grad():
                    for p in dst.parameters():
                        p.add_(torch.randn_like(p) * p.std() * args.draft_noise)
        draft = LM(args.vocab, args.dim, max_pos, draft_blocks, shared=target)
    target.to(dtype=dtype).eval()
    draft.to(dtype=dtype).eval()
    return target, draft


def make_prompt(args: argparse.Namespace, device: torch.device) -> torch.Tensor:
    gen = torch.Generator().manual_seed(args.seed + 1)
    return torch.randint(0, args.vocab, (1, args.prompt_len), generator=gen).to(device)


@torch.inference_mode()
def speculative_generate(target: LM, draft: LM, prompt: torch.Tensor, k: int, cycles: int,
                         timer=None) -> Tuple[torch.Tensor, List[int]]:
    """Run `cycles` draft+verify cycles; return the generated tokens and the accepted count per cycle.

    `timer(phase)` (optional) is called at phase boundaries: "draft", "verify", "end".
    """
    seq = prompt
    accepted: List[int] = []
    for _ in range(cycles):
        if timer:
            timer("draft")
        n = seq.shape[1]
        cand = seq
        for _ in range(k):  # k small draft forwards, each proposes one token
            nxt = draft(cand, 1)[:, -1].argmax(-1, keepdim=True)
            cand = torch.cat([cand, nxt], dim=1)
        if timer:
            timer("verify")
        # One target forward scores all k proposals: logits at n-1 .. n+k-1 are the target's own
        # greedy choices after each prefix (k checks + the bonus token).
        choice = target(cand, k + 1).argmax(-1)            # (1, k+1)
        match = (choice[:, :k] == cand[:, n:]).int()       # (1, k)
        a = int(match.cumprod(-1).sum().item())            # leading matches; the one host sync per cycle
        seq = torch.cat([seq, choice[:, : a + 1]], dim=1)  # accepted drafts equal the target's choices
        accepted.append(a + 1)
    if timer:
        timer("end")
    return seq[:, prompt.shape[1]:], accepted


@torch.inference_mode()
def greedy_generate(target: LM, prompt: torch.Tensor, n_tokens: int) -> torch.Tensor:
    """Plain greedy decoding with the target alone: the reference the speculative output must equal."""
    seq = prompt
    for _ in range(n_tokens):
        seq = torch.cat([seq, target(seq, 1)[:, -1].argmax(-1, keepdim=True)], dim=1)
    return seq[:, prompt.shape[1]:]


class PhaseTimer:
    """Accumulates draft and verify time; CUDA events on GPU, so timing adds no host syncs."""

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.marks: List[Tuple[str, object]] = []

    def __call__(self, phase: str) -> None:
        if self.cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            self.marks.append((phase, ev))
        else:
            self.marks.append((phase, time.perf_counter()))

    def totals_ms(self) -> Dict[str, float]:
        if self.cuda:
            torch.cuda.synchronize()
        totals = {"draft": 0.0, "verify": 0.0}
        for (phase, start), (_, end) in zip(self.marks, self.marks[1:]):
            if phase in totals:
                if self.cuda:
                    totals[phase] += start.elapsed_time(end)  # type: ignore[attr-defined]
                else:
                    totals[phase] += (end - start) * 1000.0  # type: ignore[operator]
        return totals


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--device", choices=["cuda", "cpu"], default=None,
                   help="default: cuda if available, else cpu")
    p.add_argument("--dtype", choices=["auto"] + sorted(DTYPES), default="auto",
                   help="auto: bfloat16 on cuda, float32 on cpu")
    p.add_argument("--steps", type=int, default=96, help="timed draft+verify cycles")
    p.add_argument("--warmup", type=int, default=1, help="untimed full generations before the timed one")
    p.add_argument("--k", type=int, default=4, help="draft tokens per cycle")
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--layers", type=int, default=12, help="target blocks")
    p.add_argument("--draft-layers", type=int, default=1, help="draft blocks (copies of the target's first ones)")
    p.add_argument("--ffn-mult", type=int, default=4)
    p.add_argument("--res-scale", type=float, default=None,
                   help="scale of every residual branch; sets how often the draft agrees "
                        "(default 0.15: accept length about 3.5 of k+1=5 at the default sizes; 0.5 with --tiny)")
    p.add_argument("--draft-noise", type=float, default=0.0, help="relative noise added to the draft's block weights")
    p.add_argument("--prompt-len", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: leave torch's default)")
    p.add_argument("--check", action="store_true",
                   help="also decode plain greedy with the target and fail (exit 1) unless the tokens are identical")
    p.add_argument("--tiny", action="store_true", help="CPU-sized model for tests (vocab 512, dim 64, 4+1 layers)")
    args = p.parse_args(argv)
    if args.tiny:
        args.vocab, args.dim, args.heads, args.layers, args.draft_layers, args.ffn_mult = 512, 64, 4, 4, 1, 2
    if args.res_scale is None:
        args.res_scale = 0.5 if args.tiny else 0.15
    for name in ("steps", "k", "vocab", "dim", "heads", "layers", "prompt_len", "ffn_mult"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.warmup < 0 or args.draft_layers < 0 or args.draft_layers > args.layers:
        p.error("--warmup must be >= 0 and 0 <= --draft-layers <= --layers")
    if args.dim % args.heads:
        p.error("--dim must be a multiple of --heads")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_spec_decode: error: --device cuda but torch sees no CUDA device", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = DTYPES[args.dtype] if args.dtype != "auto" else (torch.bfloat16 if device.type == "cuda" else torch.float32)

    target, draft = build_models(args, device, dtype)
    prompt = make_prompt(args, device)
    env_seen = {n: os.environ[n] for n in ("CUDA_LAUNCH_BLOCKING", "PYTORCH_NO_CUDA_MEMORY_CACHING",
                                           "PYTORCH_CUDA_ALLOC_CONF") if n in os.environ}
    print(f"gpu_spec_decode: device={device} dtype={str(dtype).replace('torch.', '')} "
          f"target={args.layers}x{args.dim} draft={args.draft_layers} blocks vocab={args.vocab} "
          f"k={args.k} steps={args.steps} seed={args.seed} env={env_seen}", flush=True)

    for _ in range(args.warmup):  # compile-free eager warm-up: cuBLAS handles, allocator pools, all shapes
        speculative_generate(target, draft, prompt, args.k, args.steps)
    sync(device)

    timer = PhaseTimer(device)
    sync(device)
    t0 = time.perf_counter()
    tokens, accepted = speculative_generate(target, draft, prompt, args.k, args.steps, timer=timer)
    sync(device)
    elapsed = time.perf_counter() - t0
    phases = timer.totals_ms()

    n_tokens = int(tokens.shape[1])
    result = {
        "output_throughput": n_tokens / elapsed,
        "accept_length": n_tokens / len(accepted),
        "cycle_ms": elapsed * 1000.0 / len(accepted),
        "draft_phase_ms": phases["draft"] / len(accepted),
        "verify_phase_ms": phases["verify"] / len(accepted),
    }
    print(f"gpu_spec_decode: {n_tokens} tokens in {len(accepted)} cycles, {elapsed:.3f} s; "
          f"accepted per cycle: min {min(accepted)} max {max(accepted)}", flush=True)
    status = 0
    if args.check:
        reference = greedy_generate(target, prompt, n_tokens)
        same = bool(torch.equal(reference.cpu(), tokens.cpu()))
        print(f"gpu_spec_decode: check: speculative output {'==' if same else '!='} plain greedy decoding "
              f"({n_tokens} tokens)", flush=True)
        status = 0 if same else 1
    for name, value in result.items():
        if not math.isfinite(value):
            print(f"gpu_spec_decode: error: {name} is not finite", file=sys.stderr)
            status = 1
    print(json.dumps({n: round(v, 4) for n, v in result.items()}, sort_keys=True), flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
