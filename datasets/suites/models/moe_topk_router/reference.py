def reference(x: Tensor, w_router: Tensor) -> Tuple[Tensor, Tensor]:
    # Softmax-then-top-k routing with renormalized gates (Qwen3-MoE, norm_topk_prob=True), top 8.
    # x and w_router lie on power-of-two grids, so the logits are exact in float32 whatever the
    # summation order (see task.json).
    logits = torch.matmul(x, w_router)
    probs = torch.softmax(logits, dim=-1)
    # the 8 largest logits (softmax is monotonic): larger logit first, equal logits -> lower expert
    # index first (a stable descending sort keeps the lower index first among equal values)
    _, ranked = torch.sort(logits, dim=1, descending=True, stable=True)
    top_i = ranked[:, :8]
    top_p = torch.gather(probs, 1, top_i)
    top_p = top_p / top_p.sum(dim=-1, keepdim=True)
    # the selected experts in ascending expert index, each with its gate
    experts, order = torch.sort(top_i, dim=-1)
    gates = torch.gather(top_p, 1, order)
    return gates, experts.int()
