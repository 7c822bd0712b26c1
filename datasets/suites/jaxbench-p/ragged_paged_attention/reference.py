def reference(q: Tensor, kv_pages: Tensor, page_table: Tensor, q_lens: Tensor, context_lens: Tensor) -> Tensor:
    # q: [T, HQ, D] packed new query tokens; kv_pages: [P, PS, HK, 2, D] (k at [..., 0, :], v at
    # [..., 1, :]); page_table: [S, PPS] int32; q_lens: [NP] int32 new tokens of the prefill
    # sequences; context_lens: [S] int32. Sequences 0 .. ND-1 (ND = S - NP) decode one token each,
    # sequences ND .. S-1 prefill q_lens[s - ND] tokens; tokens packed in sequence order.
    T = q.size(0)
    HQ = q.size(1)
    D = q.size(2)
    PS = kv_pages.size(1)
    HK = kv_pages.size(2)
    G = HQ // HK
    S = page_table.size(0)
    ND = S - q_lens.size(0)
    scale = 1.0 / (float(D) ** 0.5)
    outs: List[Tensor] = []
    start = 0
    for s in range(S):
        ql = 1
        if s >= ND:
            ql = int(q_lens[s - ND])
        if ql > 0:
            ctx = int(context_lens[s])
            kv_len = ctx + ql  # the new tokens' k/v are the last ql cached positions
            npages = (kv_len + PS - 1) // PS
            pages = page_table[s, :npages].long()
            kv = kv_pages.index_select(0, pages).reshape(npages * PS, HK, 2, D)[:kv_len]
            k = kv[:, :, 0, :].permute(1, 2, 0)  # [HK, D, kv_len]
            v = kv[:, :, 1, :].permute(1, 0, 2)  # [HK, kv_len, D]
            # rows (i, g): new token i of the sequence, query head hk * G + g
            qs = q[start:start + ql].reshape(ql, HK, G, D).permute(1, 0, 2, 3).reshape(HK, ql * G, D)
            sc = torch.matmul(qs, k) * scale  # [HK, ql * G, kv_len]
            last = ctx + torch.arange(ql, device=q.device).repeat_interleave(G)  # last visible position per row
            future = torch.arange(kv_len, device=q.device).view(1, kv_len) > last.view(ql * G, 1)
            sc = sc.masked_fill(future.view(1, ql * G, kv_len), float("-inf"))
            p = torch.softmax(sc, dim=-1)
            o = torch.matmul(p, v)  # [HK, ql * G, D]
            outs.append(o.reshape(HK, ql, G, D).permute(1, 0, 2, 3).reshape(ql, HQ, D))
            start += ql
    return torch.cat(outs, 0)
