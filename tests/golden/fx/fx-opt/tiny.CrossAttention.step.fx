def forward(self, x, k, v, padding_mask):
    q_proj = self.q_proj(x);  x = None
    q = torch.unflatten(q_proj, -1, (4, 16));  q_proj = None
    q_1 = torch.transpose(q, 1, 2);  q = None
    attend = attncomp_lower_ops_attend(padding_mask);  padding_mask = None
    scaled_dot_product_attention = torch._C._nn.scaled_dot_product_attention(q_1, k, v, scale = 0.25, attn_mask = attend);  q_1 = k = v = attend = None
    heads_1 = torch.transpose(scaled_dot_product_attention, 1, 2);  scaled_dot_product_attention = None
    heads_2 = torch.flatten(heads_1, -2);  heads_1 = None
    o_proj = self.o_proj(heads_2);  heads_2 = None
    return o_proj
    