def reference(q: Tensor, k_pages: Tensor, v_pages: Tensor, page_table: Tensor, lengths: Tensor) -> Tensor:
    # q: [B, HQ, D]; k_pages, v_pages: [P, PS, HK, D]; page_table: [B, PPS] int32; lengths: [B] int32
    B = q.size(0)
    HQ = q.size(1)
    D = q.size(2)
    PS = k_pages.size(1)
    HK = k_pages.size(2)
    PPS = page_table.size(1)
    L = PPS * PS
    G = HQ // HK
    pages = page_table.long().reshape(-1)
    # gather every sequence's pages: position t of sequence b is page_table[b, t // PS], slot t % PS
    k = k_pages.index_select(0, pages).reshape(B, L, HK, D).permute(0, 2, 3, 1)  # [B, HK, D, L]
    v = v_pages.index_select(0, pages).reshape(B, L, HK, D).permute(0, 2, 1, 3)  # [B, HK, L, D]
    qg = q.reshape(B, HK, G, D)  # query head h = kv head h // G, member h % G
    scale = 1.0 / (float(D) ** 0.5)
    s = torch.matmul(qg, k) * scale  # [B, HK, G, L]
    pos = torch.arange(L, device=q.device)
    past_end = pos.view(1, L) >= lengths.long().view(B, 1)  # [B, L]: positions t >= lengths[b]
    s = s.masked_fill(past_end.view(B, 1, 1, L), float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = torch.matmul(p, v)  # [B, HK, G, D]
    return o.reshape(B, HQ, D)
