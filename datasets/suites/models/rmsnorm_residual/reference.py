def reference(x: Tensor, residual: Tensor, w: Tensor) -> Tuple[Tensor, Tensor]:
    # Hugging Face LlamaRMSNorm after the residual add (vLLM's fused_add_rms_norm), in float32.
    h = x + residual
    variance = h.pow(2).mean(-1, keepdim=True)
    y = h * torch.rsqrt(variance + 1e-5)
    return h, y * w
