def reference(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    H = q.size(1)
    S = q.size(2)
    DK = q.size(3)
    # per-head decay gamma_h = 1 - 2^(-5-h) (exact in float32)
    h = torch.arange(H, dtype=q.dtype, device=q.device)
    gamma = 1.0 - torch.pow(2.0, -5.0 - h)
    pos = torch.arange(S, dtype=q.dtype, device=q.device)
    dist = pos.view(S, 1) - pos.view(1, S)
    causal = dist >= 0.0
    # decay[h, n, m] = gamma_h^(n-m) for n >= m, else 0
    powed = torch.exp(torch.log(gamma).view(H, 1, 1) * dist.clamp(min=0.0).view(1, S, S))
    decay = torch.where(causal.view(1, S, S), powed, torch.zeros_like(powed))
    scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / (float(DK) ** 0.5))
    scores = scores * decay.view(1, H, S, S)
    denom = torch.clamp(scores.abs().sum(dim=-1, keepdim=True), min=1.0)
    return torch.matmul(scores / denom, v)
