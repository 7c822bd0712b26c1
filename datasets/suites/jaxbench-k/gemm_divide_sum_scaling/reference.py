def reference(x: Tensor, weight: Tensor) -> Tensor:
    y = torch.matmul(x, weight.t())
    y = y / 2.0
    y = torch.sum(y, dim=1, keepdim=True)
    return y * 1.5
