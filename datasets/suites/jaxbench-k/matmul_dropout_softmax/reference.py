def reference(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    y = torch.linear(x, weight, bias)
    # nn.Dropout(p=0.2) is off here (inference semantics): identity.
    return torch.softmax(y, 1)
