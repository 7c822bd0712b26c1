def reference(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    y = torch.linear(x, weight, bias)
    y = y * 2.0
    y = y + y
    y = torch.clamp(y, min=-10.0, max=10.0)
    y = torch.logsumexp(y, 1, keepdim=True)
    return y * torch.mish(y)
