def forward(self, x, memory, padding_mask):
    self_attn = self.self_attn(x)
    x_1 = torch.add(x, self_attn);  x = self_attn = None
    self_attn_norm = self.self_attn_norm(x_1);  x_1 = None
    cross_attn = self.cross_attn(self_attn_norm, memory, padding_mask);  memory = padding_mask = None
    x_2 = torch.add(self_attn_norm, cross_attn);  self_attn_norm = cross_attn = None
    cross_attn_norm = self.cross_attn_norm(x_2);  x_2 = None
    ffn = self.ffn(cross_attn_norm)
    x_3 = torch.add(cross_attn_norm, ffn);  cross_attn_norm = ffn = None
    ffn_norm = self.ffn_norm(x_3);  x_3 = None
    return ffn_norm
    