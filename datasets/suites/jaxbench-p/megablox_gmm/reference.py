def reference(lhs: Tensor, rhs: Tensor, group_sizes: Tensor) -> Tensor:
    # lhs: [M, K] rows sorted by group; rhs: [G, N, K] (per-expert nn.Linear layout);
    # group_sizes: [G] int32, summing to M. Rows [start_g, start_g + group_sizes[g]) use rhs[g].
    G = rhs.size(0)
    outs: List[Tensor] = []
    start = 0
    for g in range(G):
        n = int(group_sizes[g])
        if n > 0:
            outs.append(torch.matmul(lhs[start:start + n], rhs[g].t()))
        start += n
    return torch.cat(outs, 0)
