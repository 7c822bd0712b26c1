def rms_norm(x: Tensor, w: Tensor) -> Tensor:
    # RMSNorm over the last dimension, eps 1e-6, weight w
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * w


def rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    # half-split pairs: element t rotates with element t + R/2 by the angle cos/sin[s, t]
    half = x.size(-1) // 2
    x1 = x.narrow(-1, 0, half)
    x2 = x.narrow(-1, half, half)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def reference(x: Tensor, w_dq: Tensor, q_norm: Tensor, w_uq: Tensor, w_dkv: Tensor,
              kv_norm: Tensor, w_uk: Tensor, w_uv: Tensor, w_kr: Tensor, w_o: Tensor) -> Tensor:
    # x: [S, DM]; every weight is [in, out] (y = x @ W)
    S = x.size(0)
    DR = w_kr.size(1)
    H = (w_uq.size(1) - w_uk.size(1)) // DR
    DN = w_uk.size(1) // H
    DV = w_uv.size(1) // H
    # queries: down-projection, RMSNorm, up-projection to H heads of [nope DN | rope DR]
    q = torch.matmul(rms_norm(torch.matmul(x, w_dq), q_norm), w_uq).view(S, H, DN + DR).transpose(0, 1)
    q_nope = q.narrow(2, 0, DN)                     # [H, S, DN]
    q_pe = q.narrow(2, DN, DR)                      # [H, S, DR]
    # keys / values from the shared kv latent c
    c = rms_norm(torch.matmul(x, w_dkv), kv_norm)   # [S, KVL]
    k_nope = torch.matmul(c, w_uk).view(S, H, DN).transpose(0, 1)  # [H, S, DN]
    v = torch.matmul(c, w_uv).view(S, H, DV).transpose(0, 1)       # [H, S, DV]
    # RoPE, base 10000, positions 0..S-1
    inv_freq = 1.0 / torch.pow(10000.0, torch.arange(0, DR, 2, device=x.device).float() / DR)
    angle = torch.arange(S, device=x.device).float().view(S, 1) * inv_freq.view(1, DR // 2)
    cos = torch.cos(angle)                          # [S, DR/2]
    sin = torch.sin(angle)
    k_pe = rope(torch.matmul(x, w_kr), cos, sin)    # [S, DR], shared by every head
    q_pe = rope(q_pe, cos, sin)
    scale = 1.0 / (float(DN + DR) ** 0.5)
    scores = (torch.matmul(q_nope, k_nope.transpose(1, 2)) + torch.matmul(q_pe, k_pe.t())) * scale
    pos = torch.arange(S, device=x.device)
    future = pos.view(1, S) > pos.view(S, 1)        # [i, j]: key j after query i
    scores = scores.masked_fill(future, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    o = torch.matmul(p, v).transpose(0, 1).reshape(S, H * DV)  # heads concatenated: [S, H*DV]
    return torch.matmul(o, w_o)
