def forward(self, x, cache, padding_mask):
    self_attn = cache.self_attn
    k = self_attn.k
    v = self_attn.v;  self_attn = None
    self_attn_1 = self.self_attn
    step = self_attn_1.step(x, k, v);  self_attn_1 = k = v = None
    k_1 = step[1]
    v_1 = step[2]
    attended = step[0];  step = None
    x_1 = torch.add(x, attended);  x = attended = None
    self_attn_norm = self.self_attn_norm(x_1);  x_1 = None
    cross_attn = cache.cross_attn;  cache = None
    k_2 = cross_attn.k
    v_2 = cross_attn.v
    cross_attn_1 = self.cross_attn
    step_1 = cross_attn_1.step(self_attn_norm, k_2, v_2, padding_mask);  cross_attn_1 = k_2 = v_2 = padding_mask = None
    x_2 = torch.add(self_attn_norm, step_1);  self_attn_norm = step_1 = None
    cross_attn_norm = self.cross_attn_norm(x_2);  x_2 = None
    ffn = self.ffn(cross_attn_norm)
    x_3 = torch.add(cross_attn_norm, ffn);  cross_attn_norm = ffn = None
    ffn_norm = self.ffn_norm(x_3);  x_3 = None
    self_kv = attncomp_lower_cache_KV(k_1, v_1);  k_1 = v_1 = None
    cache_1 = attncomp_lower_cache_LayerCache(self_kv, cross_attn);  self_kv = cross_attn = None
    return (ffn_norm, cache_1)
    