def forward(self, x, past_k, past_v):
    q_proj = self.q_proj(x)
    q = torch.unflatten(q_proj, -1, (4, 16));  q_proj = None
    q_1 = torch.transpose(q, 1, 2);  q = None
    k_proj = self.k_proj(x)
    k = torch.unflatten(k_proj, -1, (4, 16));  k_proj = None
    k_1 = torch.transpose(k, 1, 2);  k = None
    v_proj = self.v_proj(x);  x = None
    v = torch.unflatten(v_proj, -1, (4, 16));  v_proj = None
    v_1 = torch.transpose(v, 1, 2);  v = None
    k_2 = torch.cat((past_k, k_1), 2);  past_k = k_1 = None
    v_2 = torch.cat((past_v, v_1), 2);  past_v = v_1 = None
    k_t = torch.transpose(k_2, -2, -1)
    scores = torch.matmul(q_1, k_t);  q_1 = k_t = None
    scores_1 = torch.mul(scores, 0.25);  scores = None
    weights = torch.softmax(scores_1, -1);  scores_1 = None
    heads = torch.matmul(weights, v_2);  weights = None
    heads_1 = torch.transpose(heads, 1, 2);  heads = None
    heads_2 = torch.flatten(heads_1, -2);  heads_1 = None
    o_proj = self.o_proj(heads_2);  heads_2 = None
    return (o_proj, k_2, v_2)
    