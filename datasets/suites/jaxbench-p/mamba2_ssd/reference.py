def reference(x: Tensor, dt: Tensor, A: Tensor, Bm: Tensor, Cm: Tensor) -> Tensor:
    S = x.size(1)
    H = x.size(2)
    # per-step log-decay dA[b, h, k] = dt[b, k, h] * A[h]; cs = its running sum over positions
    dA = (dt * A.view(1, 1, H)).permute(0, 2, 1)
    cs = torch.cumsum(dA, dim=-1)
    idx = torch.arange(S, device=x.device)
    upper = idx.view(S, 1) < idx.view(1, S)  # [i, j]: j > i
    # L[b, h, i, j] = exp(sum_{k=j+1..i} dA[b, h, k]) for j <= i, else 0
    L = torch.exp((cs.unsqueeze(-1) - cs.unsqueeze(-2)).masked_fill(upper, float("-inf")))
    # CB[b, i, j] = Cm[b, i] . Bm[b, j] (one group, shared by all heads)
    CB = torch.matmul(Cm, Bm.transpose(1, 2))
    M = CB.unsqueeze(1) * L * dt.permute(0, 2, 1).unsqueeze(2)
    # y[b, h, i, :] = sum_j M[b, h, i, j] * x[b, j, h, :]; no D skip term
    y = torch.matmul(M, x.permute(0, 2, 1, 3))
    return y.permute(0, 2, 1, 3).contiguous()
