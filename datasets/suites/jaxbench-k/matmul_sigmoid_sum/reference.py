def reference(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    y = torch.linear(x, weight, bias)
    y = torch.sigmoid(y)
    return torch.sum(y, dim=1, keepdim=True)
