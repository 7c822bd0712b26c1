def reference(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    S = q.size(1)
    D = q.size(2)
    sink = 4
    window = 128
    scale = 1.0 / (float(D) ** 0.5)
    scores = torch.matmul(q, k.transpose(1, 2)) * scale
    i = torch.arange(S).view(S, 1)
    j = torch.arange(S).view(1, S)
    # key j is visible to query i when it is not in the future and is a sink or in the window
    visible = (j <= i) & ((j < sink) | (i - j < window))
    scores = scores.masked_fill(torch.logical_not(visible).view(1, S, S), float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return torch.matmul(p, v)
