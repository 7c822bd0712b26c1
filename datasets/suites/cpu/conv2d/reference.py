def reference(x: Tensor, w: Tensor, bias: Tensor) -> Tensor:
    return torch.conv2d(x, w, bias, stride=1, padding=1)
