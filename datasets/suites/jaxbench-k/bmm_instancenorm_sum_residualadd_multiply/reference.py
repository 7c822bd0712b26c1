def reference(x: Tensor, y: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    h = torch.linear(x, weight, bias)                                   # [M, N]
    # InstanceNorm2d (affine False, no running stats) on [M, 1, 1, N]: each row over its N features
    h = torch.instance_norm(h.unsqueeze(1).unsqueeze(1), None, None, None, None,
                            True, 0.1, 1e-5, False).squeeze(1).squeeze(1)
    h = h + y
    return h * y
