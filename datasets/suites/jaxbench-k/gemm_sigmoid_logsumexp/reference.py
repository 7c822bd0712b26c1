def reference(x: Tensor, weight1: Tensor, bias1: Tensor, weight2: Tensor, bias2: Tensor) -> Tensor:
    h = torch.linear(x, weight1, bias1)
    h = torch.sigmoid(h)
    z = torch.linear(h, weight2, bias2)
    return torch.logsumexp(z, 1)
