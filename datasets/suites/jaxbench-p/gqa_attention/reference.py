def reference(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    # q: [B, S, HQ, D]; k, v: [B, S, HKV, D]; query head h reads kv head h // (HQ / HKV)
    S = q.size(1)
    D = q.size(3)
    G = q.size(2) // k.size(2)
    qh = q.transpose(1, 2)                                   # [B, HQ, S, D]
    kh = torch.repeat_interleave(k.transpose(1, 2), G, dim=1)  # [B, HQ, S, D]
    vh = torch.repeat_interleave(v.transpose(1, 2), G, dim=1)
    scale = 1.0 / (float(D) ** 0.5)
    scores = torch.matmul(qh, kh.transpose(2, 3)) * scale
    pos = torch.arange(S, device=q.device)
    future = pos.view(1, S) > pos.view(S, 1)  # [i, j]: key j after query i
    scores = scores.masked_fill(future, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return torch.matmul(p, vh).transpose(1, 2).contiguous()  # [B, S, HQ, D]
