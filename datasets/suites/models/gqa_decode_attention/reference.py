def reference(q: Tensor, k_cache: Tensor, v_cache: Tensor, lengths: Tensor) -> Tensor:
    B = q.size(0)
    Hq = q.size(1)
    D = q.size(2)
    Hk = k_cache.size(1)
    S = k_cache.size(2)
    G = Hq // Hk
    # query heads h = g_kv * G + j share kv head g_kv (repeat_kv / GQA grouping)
    qg = q.view(B, Hk, G, D)
    scale = 1.0 / (float(D) ** 0.5)
    scores = torch.matmul(qg, k_cache.transpose(2, 3)) * scale
    # mask[b, s] is True for the cache slots s >= lengths[b], which hold no token yet
    mask = torch.arange(S).view(1, S) >= lengths.view(B, 1)
    scores = scores.masked_fill(mask.view(B, 1, 1, S), float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return torch.matmul(p, v_cache).reshape(B, Hq, D)
