"""STAND-IN for sglang/srt/layers/moe/topk.py, written for envsnap's illustrative example.

Not SGLang's code: a short text of envsnap's own (see snapshots/illustrative-src/README.md) that
keeps only the facts the example's story rests on, from sglang 0.5.5 sglang/srt/layers/moe/topk.py:
- TopKConfig (line 91) carries the routing settings, among them correction_bias (DeepSeek-V3's
  per-expert load-balancing bias) and use_grouped_topk;
- select_experts (line 821) picks each token's top-k experts: grouped routing for DeepSeek V2/V3/R1
  (biased when the model has a correction bias), plain top-k of the router's softmax otherwise.
The routing arithmetic below is a plain-torch sketch, not SGLang's kernels.
"""
import os
from dataclasses import dataclass
from typing import Optional

import torch

# ROCm builds may route through AITER kernels instead (topk.py line 72 reads SGLANG_USE_AITER).
_USE_AITER = os.environ.get("SGLANG_USE_AITER", "0") == "1" and torch.version.hip is not None


@dataclass
class TopKConfig:
    top_k: int
    use_grouped_topk: bool = False
    num_expert_group: Optional[int] = None
    topk_group: Optional[int] = None
    correction_bias: Optional[torch.Tensor] = None
    renormalize: bool = True


def _grouped_topk(scores, config):
    """Keep the best `topk_group` of `num_expert_group` groups, then the best experts inside them."""
    tokens, experts = scores.shape
    groups = scores.view(tokens, config.num_expert_group, -1)
    best_groups = groups.max(dim=-1).values.topk(config.topk_group, dim=-1).indices
    keep = torch.zeros_like(groups[..., 0]).scatter_(1, best_groups, 1.0)
    masked = scores.masked_fill(keep.repeat_interleave(experts // config.num_expert_group, 1) == 0, float("-inf"))
    return masked.topk(config.top_k, dim=-1).indices


def select_experts(hidden_states, router_logits, config: TopKConfig):
    """(weights, expert ids) per token for the MoE layer."""
    correction_bias = config.correction_bias
    scores = router_logits.sigmoid() if correction_bias is not None else router_logits.softmax(dim=-1)

    # Grouped routing (DeepSeek V2/V3/R1); the bias only steers the choice, not the weights
    if config.use_grouped_topk:
        choice = scores if correction_bias is None else scores + correction_bias.unsqueeze(0)
        topk_ids = _grouped_topk(choice, config)
    else:
        topk_ids = scores.topk(config.top_k, dim=-1).indices
    topk_weights = scores.gather(1, topk_ids)
    if config.renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
    return topk_weights, topk_ids
