def reference(x: Tensor, Wr: Tensor, Wg: Tensor, Wu: Tensor, Wd: Tensor) -> Tensor:
    T = x.size(0)
    E = Wr.size(1)
    logits = torch.matmul(x, Wr)                      # [T, E] router logits
    top_vals, top_idx = torch.topk(logits, 2, dim=1)  # the two largest per token
    gates = torch.softmax(top_vals, dim=1)            # softmax over the two selected logits
    weights = torch.zeros([T, E], dtype=x.dtype).scatter(1, top_idx, gates)  # [T, E], 2 nonzeros a row
    chosen = torch.zeros([T, E], dtype=x.dtype).scatter(1, top_idx, torch.ones_like(gates))
    out = torch.zeros_like(x)
    for e in range(E):
        tok = torch.nonzero(chosen[:, e] > 0.5).squeeze(1)  # tokens routed to expert e
        if tok.numel() > 0:
            xe = x.index_select(0, tok)
            h = torch.silu(torch.matmul(xe, Wg[e])) * torch.matmul(xe, Wu[e])
            ye = torch.matmul(h, Wd[e])
            g = weights[:, e].index_select(0, tok).unsqueeze(1)
            out.index_add_(0, tok, ye * g)
    return out
