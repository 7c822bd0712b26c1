def reference(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    # q, k, v: [B, H, S, D]
    S = q.size(2)
    D = q.size(3)
    scale = 1.0 / (float(D) ** 0.5)
    scores = torch.matmul(q, k.transpose(2, 3)) * scale
    pos = torch.arange(S, device=q.device)
    # future[i, j] is True for the keys j > i (masked out)
    future = pos.view(1, S) > pos.view(S, 1)
    scores = scores.masked_fill(future, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return torch.matmul(p, v)
