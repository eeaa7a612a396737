def forward(self, x, k, v, padding_mask):
    q_proj = self.q_proj(x);  x = None
    q = torch.unflatten(q_proj, -1, (4, 16));  q_proj = None
    q_1 = torch.transpose(q, 1, 2);  q = None
    k_t = torch.transpose(k, -2, -1);  k = None
    scores = torch.matmul(q_1, k_t);  q_1 = k_t = None
    scores_1 = torch.mul(scores, 0.25);  scores = None
    scores_2 = attncomp_lower_ops_hide(scores_1, padding_mask);  scores_1 = None
    weights = torch.softmax(scores_2, -1);  scores_2 = None
    weights_1 = attncomp_lower_ops_zero_rows(weights, padding_mask);  weights = padding_mask = None
    heads = torch.matmul(weights_1, v);  weights_1 = v = None
    heads_1 = torch.transpose(heads, 1, 2);  heads = None
    heads_2 = torch.flatten(heads_1, -2);  heads_1 = None
    o_proj = self.o_proj(heads_2);  heads_2 = None
    return o_proj
    