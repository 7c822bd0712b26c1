def reference(x: Tensor, w: Tensor) -> Tensor:
    ms = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(ms + 1e-5) * w
