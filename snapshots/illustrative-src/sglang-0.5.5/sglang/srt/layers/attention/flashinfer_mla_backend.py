"""STAND-IN for sglang/srt/layers/attention/flashinfer_mla_backend.py, written for envsnap's illustrative
example.

Not SGLang's code: a short text of envsnap's own (see snapshots/illustrative-src/README.md) that
keeps only the facts the example's story rests on, from sglang 0.5.5
sglang/srt/layers/attention/flashinfer_mla_backend.py:
- FlashInferMLAAttnBackend(AttentionBackend) (line 190) is the attention backend for MLA models
  (DeepSeek-V3) on FlashInfer;
- its __init__ allocates one FlashInfer workspace shared by every instance, the module-level
  global_workspace_buffer, of envs.SGLANG_FLASHINFER_WORKSPACE_SIZE bytes (lines 214-223);
- forward_decode (line 592) writes the new token's latent KV to the cache, splits the query into its
  no-RoPE and RoPE parts, and calls the decode wrapper's run() into a preallocated output (lines 640-650).
"""
import torch
from sglang.srt.environ import envs
from sglang.srt.layers.attention.base_attn_backend import AttentionBackend

global_workspace_buffer = None  # one workspace for all MLA backends of the process


class FlashInferMLAAttnBackend(AttentionBackend):
    """MLA attention through FlashInfer's paged decode and ragged prefill kernels."""

    def __init__(self, model_runner, skip_prefill=False):
        super().__init__()
        self.device = model_runner.device
        self.page_size = model_runner.page_size
        self.skip_prefill = skip_prefill

        global global_workspace_buffer
        if global_workspace_buffer is None:
            size = envs.SGLANG_FLASHINFER_WORKSPACE_SIZE.get()
            global_workspace_buffer = torch.empty(size, dtype=torch.uint8, device=self.device)
        self.workspace_buffer = global_workspace_buffer
        self.forward_metadata = None

    def forward_decode(self, q, k, v, layer, forward_batch, save_kv_cache=True, q_rope=None, k_rope=None):
        """One decode step of one layer: cache the latent KV, then attend over the whole cache."""
        decode_wrapper = self.forward_metadata.decode_wrapper
        pool = forward_batch.token_to_kv_pool
        if k is not None and save_kv_cache:
            pool.set_mla_kv_buffer(layer, forward_batch.out_cache_loc, k, k_rope)

        heads, latent = layer.tp_q_head_num, layer.v_head_dim
        q_nope = q.view(-1, heads, latent)
        q_rope = q_rope.view(-1, heads, layer.head_dim - latent)
        kv = pool.get_key_buffer(layer.layer_id).to(q.dtype)

        out = q_nope.new_empty(q_nope.shape)
        out = decode_wrapper.run(q_nope, q_rope, kv[:, :, :latent], kv[:, :, latent:], out=out)
        return out.view(-1, heads * latent)
