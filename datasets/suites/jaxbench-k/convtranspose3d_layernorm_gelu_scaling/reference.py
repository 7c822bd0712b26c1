def reference(x: Tensor, weight: Tensor, ln_weight: Tensor, ln_bias: Tensor) -> Tensor:
    # ConvTranspose3d(Cin, Cout, 4, stride=2, padding=1), bias omitted (see task.json)
    y = torch.conv_transpose3d(x, weight, None, stride=2, padding=1)   # [N, Cout, 2D, 2H, 2W]
    # nn.LayerNorm(Cout) on [N, Cout, 2D, 2H, 2W]: normalizes the last dim (2W == Cout)
    y = torch.layer_norm(y, [ln_weight.size(0)], ln_weight, ln_bias, 1e-5)
    y = torch.gelu(y)
    return y * 1.0
