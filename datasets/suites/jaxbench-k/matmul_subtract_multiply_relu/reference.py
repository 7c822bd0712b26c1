def reference(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    y = torch.linear(x, weight, bias)
    y = y - 2.0
    y = y * 1.5
    return torch.relu(y)
