def reference(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    y = torch.linear(x, weight, bias)
    y = torch.max(y, dim=0, keepdim=True).values
    y = y - y.mean(dim=1, keepdim=True)
    return torch.gelu(y)
