def forward(self, x):
    q_proj_weight = self.q_proj.weight
    k_proj_weight = self.k_proj.weight
    v_proj_weight = self.v_proj.weight
    cat = torch.cat((q_proj_weight, k_proj_weight, v_proj_weight));  q_proj_weight = k_proj_weight = v_proj_weight = None
    linear = torch._C._nn.linear(x, cat, None);  x = cat = None
    split = torch.functional.split(linear, (64, 64, 64), -1);  linear = None
    getitem = split[0]
    getitem_1 = split[1]
    getitem_2 = split[2];  split = None
    q = torch.unflatten(getitem, -1, (4, 16));  getitem = None
    q_1 = torch.transpose(q, 1, 2);  q = None
    k = torch.unflatten(getitem_1, -1, (4, 16));  getitem_1 = None
    k_1 = torch.transpose(k, 1, 2);  k = None
    v = torch.unflatten(getitem_2, -1, (4, 16));  getitem_2 = None
    v_1 = torch.transpose(v, 1, 2);  v = None
    scaled_dot_product_attention = torch._C._nn.scaled_dot_product_attention(q_1, k_1, v_1, scale = 0.25, is_causal = True);  q_1 = k_1 = v_1 = None
    heads_1 = torch.transpose(scaled_dot_product_attention, 1, 2);  scaled_dot_product_attention = None
    heads_2 = torch.flatten(heads_1, -2);  heads_1 = None
    o_proj = self.o_proj(heads_2);  heads_2 = None
    return o_proj
    