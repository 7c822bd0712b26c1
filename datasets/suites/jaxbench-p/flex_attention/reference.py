def reference(q: Tensor, k: Tensor, v: Tensor, bias_table: Tensor) -> Tensor:
    # q, k, v: [B, H, S, D]; bias_table: [H, S], indexed by the distance i - j >= 0.
    H = q.size(1)
    S = q.size(2)
    D = q.size(3)
    scale = 1.0 / (float(D) ** 0.5)
    scores = torch.matmul(q, k.transpose(2, 3)) * scale  # [B, H, S, S]
    pos = torch.arange(S, device=q.device)
    dist = pos.view(S, 1) - pos.view(1, S)  # [i, j] -> i - j
    # bias[h, i, j] = bias_table[h, i - j] (the future entries, clamped to 0, are masked below)
    bias = bias_table.index_select(1, torch.clamp(dist, min=0).reshape(-1)).view(H, S, S)
    scores = scores + bias
    scores = scores.masked_fill(dist < 0, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return torch.matmul(p, v)
