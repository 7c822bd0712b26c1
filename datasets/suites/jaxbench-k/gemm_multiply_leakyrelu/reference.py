def reference(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    y = torch.linear(x, weight, bias)
    y = y * 2.0
    return torch.leaky_relu(y, 0.1)
