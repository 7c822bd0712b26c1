def rotate_half(x: Tensor) -> Tensor:
    half = x.size(-1) // 2
    x1 = x[..., :half]
    x2 = x[..., half:]
    return torch.cat([-x2, x1], dim=-1)


def reference(q: Tensor, k: Tensor, pos: Tensor) -> Tuple[Tensor, Tensor]:
    # Hugging Face Llama / GPT-NeoX rotary embedding (half-split layout), base 10000. The angles
    # pos * base^(-2i/D) and their cos/sin are computed in float64 and rounded to float32 (Hugging
    # Face does this in float32, whose angle error reaches ~5e-4 rad at position 8191).
    D = q.size(2)
    inv_freq = 1.0 / torch.pow(10000.0, torch.arange(0, D, 2).double() / D)
    ang = pos.double().unsqueeze(1) * inv_freq.unsqueeze(0)
    emb = torch.cat([ang, ang], dim=-1)
    cos = torch.cos(emb).float().unsqueeze(1)
    sin = torch.sin(emb).float().unsqueeze(1)
    q_out = q * cos + rotate_half(q) * sin
    k_out = k * cos + rotate_half(k) * sin
    return q_out, k_out
