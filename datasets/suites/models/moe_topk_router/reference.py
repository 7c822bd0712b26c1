def reference(x: Tensor, w_router: Tensor) -> Tuple[Tensor, Tensor]:
    # Softmax-then-top-k routing with renormalized gates (Qwen3-MoE, norm_topk_prob=True), top 8.
    logits = torch.matmul(x, w_router)
    probs = torch.softmax(logits, dim=-1)
    top_p, top_i = torch.topk(probs, 8, dim=-1)
    top_p = top_p / top_p.sum(dim=-1, keepdim=True)
    # the selected experts in ascending expert index, each with its gate
    experts, order = torch.sort(top_i, dim=-1)
    gates = torch.gather(top_p, 1, order)
    return gates, experts.int()
