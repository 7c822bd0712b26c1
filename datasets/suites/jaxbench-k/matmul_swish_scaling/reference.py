def reference(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    y = torch.linear(x, weight, bias)
    y = y * torch.sigmoid(y)
    return y * 2.0
