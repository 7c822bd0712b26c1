def reference(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    y = torch.linear(x, weight, bias)
    original_x = y.clone()
    y = y * 0.5
    return y + original_x
