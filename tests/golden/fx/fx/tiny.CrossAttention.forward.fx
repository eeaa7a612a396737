def forward(self, x, memory, padding_mask):
    q_proj = self.q_proj(x);  x = None
    q = torch.unflatten(q_proj, -1, (4, 16));  q_proj = None
    q_1 = torch.transpose(q, 1, 2);  q = None
    k_proj = self.k_proj(memory)
    k = torch.unflatten(k_proj, -1, (4, 16));  k_proj = None
    k_1 = torch.transpose(k, 1, 2);  k = None
    v_proj = self.v_proj(memory);  memory = None
    v = torch.unflatten(v_proj, -1, (4, 16));  v_proj = None
    v_1 = torch.transpose(v, 1, 2);  v = None
    k_t = torch.transpose(k_1, -2, -1);  k_1 = None
    scores = torch.matmul(q_1, k_t);  q_1 = k_t = None
    scores_1 = torch.mul(scores, 0.25);  scores = None
    scores_2 = attncomp_lower_ops_hide(scores_1, padding_mask);  scores_1 = None
    weights = torch.softmax(scores_2, -1);  scores_2 = None
    weights_1 = attncomp_lower_ops_zero_rows(weights, padding_mask);  weights = padding_mask = None
    heads = torch.matmul(weights_1, v_1);  weights_1 = v_1 = None
    heads_1 = torch.transpose(heads, 1, 2);  heads = None
    heads_2 = torch.flatten(heads_1, -2);  heads_1 = None
    o_proj = self.o_proj(heads_2);  heads_2 = None
    return o_proj
    