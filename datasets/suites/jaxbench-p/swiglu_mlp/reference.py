def reference(x: Tensor, Wg: Tensor, Wu: Tensor, Wd: Tensor) -> Tensor:
    h = torch.silu(torch.matmul(x, Wg)) * torch.matmul(x, Wu)
    return torch.matmul(h, Wd)
