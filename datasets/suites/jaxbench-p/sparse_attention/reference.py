def reference(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    # q: [HQ, S, D]; k, v: [HKV, S, D]; query head h reads kv head h // (HQ / HKV).
    # Causal sliding window of W = 128 positions: query i sees the keys j with i - W < j <= i.
    # Computed block by block: the W queries of block c only need keys from (c - 1) * W on.
    W = 128
    S = q.size(1)
    D = q.size(2)
    G = q.size(0) // k.size(0)
    kh = torch.repeat_interleave(k, G, dim=0)  # [HQ, S, D]
    vh = torch.repeat_interleave(v, G, dim=0)
    scale = 1.0 / (float(D) ** 0.5)
    outs: List[Tensor] = []
    for q0 in range(0, S, W):
        q1 = min(q0 + W, S)
        k0 = max(q0 - W, 0)
        scores = torch.matmul(q[:, q0:q1], kh[:, k0:q1].transpose(1, 2)) * scale  # [HQ, q1-q0, q1-k0]
        dist = torch.arange(q0, q1, device=q.device).view(-1, 1) - torch.arange(k0, q1, device=q.device).view(1, -1)
        outside = torch.logical_or(dist < 0, dist >= W)
        scores = scores.masked_fill(outside, float("-inf"))
        p = torch.softmax(scores, dim=-1)
        outs.append(torch.matmul(p, vh[:, k0:q1]))
    return torch.cat(outs, dim=1)
