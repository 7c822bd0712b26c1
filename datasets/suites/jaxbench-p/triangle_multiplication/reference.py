def reference(z: Tensor, ln_in_w: Tensor, ln_in_b: Tensor, W_ab: Tensor, b_ab: Tensor,
              ln_out_w: Tensor, ln_out_b: Tensor, Wo: Tensor, bo: Tensor, Wg: Tensor,
              bg: Tensor) -> Tensor:
    C = z.size(2)
    CH = Wo.size(0)
    zl = torch.layer_norm(z, [C], ln_in_w, ln_in_b, 1e-5)
    # W_ab[p] for p = 0: a, 1: a gate, 2: b, 3: b gate; each x @ W_ab[p] with W_ab[p] of shape [C, CH]
    a = torch.sigmoid(torch.matmul(zl, W_ab[1]) + b_ab[1]) * (torch.matmul(zl, W_ab[0]) + b_ab[0])
    b = torch.sigmoid(torch.matmul(zl, W_ab[3]) + b_ab[3]) * (torch.matmul(zl, W_ab[2]) + b_ab[2])
    # outgoing edges: t[i, j, c] = sum_k a[i, k, c] * b[j, k, c]
    t = torch.matmul(a.permute(2, 0, 1), b.permute(2, 1, 0)).permute(1, 2, 0)
    tl = torch.layer_norm(t, [CH], ln_out_w, ln_out_b, 1e-5)
    g = torch.sigmoid(torch.matmul(zl, Wg) + bg)
    return g * (torch.matmul(tl, Wo) + bo)
