def reference(x: Tensor, weight: Tensor) -> Tensor:
    y = torch.conv2d(x, weight)
    # InstanceNorm2d(affine=False): per (n, c) statistics over H, W, eps 1e-5
    y = torch.instance_norm(y, None, None, None, None, True, 0.1, 1e-5, False)
    return y / 2.0
