def reference(a: Tensor, b: Tensor) -> Tensor:
    return torch.silu(a) * b
