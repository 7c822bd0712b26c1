def reference(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    y = torch.linear(x, weight, bias)
    y = torch.avg_pool1d(y.unsqueeze(1), [16], [16]).squeeze(1)
    y = torch.gelu(y)
    y = y * 2.0
    return torch.max(y, dim=1)[0]
