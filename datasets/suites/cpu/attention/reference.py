def reference(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    D = q.size(2)
    scale = 1.0 / (float(D) ** 0.5)
    scores = torch.matmul(q, k.transpose(1, 2)) * scale
    # mask[b, i, j] is True for the future keys j > i
    mask = torch.ones_like(scores).triu(1) > 0.5
    scores = scores.masked_fill(mask, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return torch.matmul(p, v)
